"""A standalone implementation of the OpenStack Placement API."""
