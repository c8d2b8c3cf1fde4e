"""The allocation-candidate engine: which sets of providers could satisfy a
request now (``GET /allocation_candidates``), and why
(``GET /allocation_candidates/explain``); and, from the same provider
copy, what the cloud holds and uses (``GET /capacity/providers``, the
capacity gauges). It never writes.

Its parts, each with one job, in the order the arrows run (each imports
only those above it):

- ``filters``: the trait and aggregate filters a request group carries.
- ``model``: the search's data: ``Provider`` records, ``RequestGroup`` and
  ``SearchOptions``, group candidates and results.
- ``checks``: what a provider must pass to serve a request group (has the
  class, the amount fits, traits, aggregates, in_tree), each rule written
  once as a named check: the search keeps the providers passing them all,
  the explanation applies them in turn and counts what each lets through.
- ``world``: ``World``, the providers one search reads, its anchors and
  their members (a tree and the sharing providers serving it).
- ``groups``: every way one group can be satisfied within one anchor's tree.
- ``search``: the groups combined per anchor, the anchors taking turns,
  lazily, up to the limit; in memory, no database.
- ``memo`` and ``kept``: what is kept, by scope, each entry under a named
  key class that says what it is and what it was made from; ``KeptStore``
  bounds what the requests of one database keep, in bytes.
- ``provider_copy``: the per-process provider copy (trees, inventories,
  traits, aggregates and the indexes the search starts from), an
  immutable ``ProviderCopy`` per moment; ``follower`` reads it from the
  database and brings it up to date from the change record at each
  request (and in the background).
- ``usage_mirror``: every provider's usage, an immutable ``Usages``
  snapshot per moment, which ``follower`` brings up to date from the
  usage change record beside the copy.
- ``batches``: a tree's members as the search loads them, and the first
  batches of trees kept between requests.
- ``tree_view``: ``TreeView``, the trees of the copy as one set of
  requested classes searches them (members, search records, rooms) at one
  usages snapshot, made as requests ask and kept for every later request
  of those classes whatever its filters, rebased on a newer snapshot by
  what changed.
- ``copy_world``: ``CopyWorld``, the world of one request made from the
  provider copy and the view of its classes, with the usages of one
  snapshot of the mirror, taken batch by batch as the search goes.
- ``answers`` and ``summaries``: what an answer is made of, its allocation
  requests and provider summaries.
- ``find``: one request: names checked, the copy brought up to date, the
  search, the answer; a whole answer is kept too, for the next request of
  the same kind, given again while the copy (by its serial) is the same
  and no provider the search and the summaries read moved since the
  snapshot they read.
- ``explain``: the funnel of each group's checks and of the tree steps,
  counted on the same copy and usages as the search, and why each named
  provider is ruled out.
- ``inventory_usages``: every provider's inventories from the copy with
  the mirror's usages, for monitoring: what
  ``GET /capacity/providers`` lists and the capacity gauges of
  ``GET /metrics`` add up, per class, for the cloud and each aggregate.
- ``lists``: provider lists asking for capacity (``GET /resource_providers``
  with ``resources``), made by ``placement.objects.resource_provider`` and
  kept whole in the same store, given again while the change counters, the
  usages of the requested classes and every provider's generation and
  update time are what they were.

The coherence rule. Every table the copy or a kept result reads
(``resource_providers``, ``inventories``, ``resource_provider_traits``,
``resource_provider_aggregates``, and the names of resource classes) has its
changes recorded by database triggers (``placement.db.triggers``) in the
transaction of the change, whoever writes: this service, the original one,
an operator's SQL. Each request reads the change counters first
(``placement.db.provider_changes``) and reloads the providers changed
since, so a process is never behind the database by more than its current
request. A full reload (the first request, a process too far behind, a
renamed resource class, ``placement-manage reload``) starts a new
``KeptStore``: nothing kept from the old records holds. What is derived
from a copy's indexes (``ProviderCopy.memo``) lives and dies with them, and
what is derived from a provider record (``CachedProvider.memo``: search
records, summaries, a root's members) with that record, which a change of
the provider replaces. Usages are not in the copy: the usage mirror
follows them alike (``inventories.used`` moves are recorded by triggers
too, in their own record, so that a claim does not make a new copy), and
a kept result or answer holds only while the usages it was found with are
still the mirror's.

Imports run one way: this package uses ``placement.objects`` (inventory,
resource_class, trait) and ``placement.db``; nothing in
``placement.objects`` imports it, and it knows nothing of HTTP (handlers,
webob).
"""
