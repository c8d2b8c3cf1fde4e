"""Capacity: how many more whole instances of a request shape fit, in
total and per root provider, and what a drain would leave. It never writes.

A shape is written in the candidates query language (request groups and
search options, ``placement.candidates.model``) and counted on the
candidate engine's provider copy with one read of the usages:

- ``tables``: what is kept per copy (``ProviderCopy.memo``) to count fast:
  per class and filter, its holders' capacities and unit rules as flat
  tuples.
- ``usages``: the usages of one transaction, each class read once (a
  scrape of many shapes reads each of their classes once).
- ``simulate``: a world of ``placement.candidates.world.World`` made from
  the copy with its own usages, on which claims are simulated in memory:
  the engine's own search gives the first candidate of a tree, the claim
  takes it as many times as it fits.
- ``count``: one shape counted. A single request group whose candidates
  within a tree never depend on another tree (no sharing provider of a
  requested class serving it) is counted exactly from the holders' free
  slots: a spread group takes each class from any able member, so the
  classes run out independently and the count is the scarcest class's
  slots; a group taking everything from one provider is the sum of its
  providers' counts. Every other tree (sharing providers, several
  groups, same_subtree, required traits over a tree of several holders)
  is filled by simulated claims of its first candidate until none is
  left, the trees in the order the search visits them: what a client
  asking for candidates and claiming the first one would get, a lower
  bound of the true maximum (a packing problem), said as ``exact:
  false``.
- ``drain``: providers (and their descendants) or an aggregate taken out,
  and whether each consumer on them could be placed elsewhere by its
  current allocations (largest first, simulated).
- ``report``: the answer as plain data: total, top roots, aggregates,
  binding classes, the drain.
- ``gauges``: the Prometheus collector of the configured shapes, counted
  at scrape time by the answering process within a CPU budget.
- ``resource_gauges``: the Prometheus collector of the capacity, usage and
  free amount of each resource class, in the whole cloud and per
  aggregate, summed at scrape time from the provider copy
  (``placement.candidates.inventory_usages``).
- ``chart``: an answer drawn as an SVG bar chart (``placement-capacity
  --chart``).

Imports run one way: this package uses ``placement.candidates``,
``placement.objects`` and ``placement.db``, and knows nothing of HTTP.
"""
