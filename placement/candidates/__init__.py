"""The allocation-candidate engine: which sets of providers could satisfy a
request now (``GET /allocation_candidates``), and why
(``GET /allocation_candidates/explain``). It never writes.

Its parts:

- ``search``: the search itself, in memory: request groups, options and
  results, and the ``World`` it searches (providers, trees, the sharing
  providers serving each anchor); no database here.
- ``snapshot``: the per-process copy of what providers are (trees,
  inventories, traits, aggregates and the indexes the search starts from),
  an immutable ``Snapshot`` per moment, its refresh at each request from
  the database's change record, and ``KeptStore``, where requests keep
  results for later ones.
- ``find``: one request: names checked, the snapshot brought up to date,
  the world it searches (``SnapshotWorld``: the snapshot's trees with this
  request's usages, read batch by batch as the search goes), the kept
  results at each anchor reused while its members and their usages are the
  same, then the provider summaries and allocation requests of the answer.
  A whole answer is kept too, for the next request of the same kind: given
  again while the snapshot (by its serial) is the same and every usage
  read the search and the summaries made gives again what it gave.
- ``checks``: what a provider must pass to serve a request group (has the
  class, the amount fits, traits, aggregates, in_tree), each rule written
  once as a named check: the search keeps the providers passing them all,
  the explanation applies them in turn and counts what each lets through.
- ``explain``: the funnel of each group's checks and of the tree
  steps, counted on the same snapshot and usages as the search, and why
  each named provider is ruled out.
- ``lists``: provider lists asking for capacity (``GET /resource_providers``
  with ``resources``), made by ``placement.objects.resource_provider`` and
  kept whole in the same store, given again while the change counters, the
  usages of the requested classes and every provider's generation and
  update time are what they were.
- ``filters``: the trait and aggregate filters a request group carries.
- ``memo``: what is kept, by scope (a snapshot, a provider record, a
  result, the kept store of a database), each entry under a named key
  class that says what it is and what it was made from.

The coherence rule. Every table the snapshot or a kept result reads
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
from a snapshot's indexes (``Snapshot.memo``) lives and dies with them, and
what is derived from a provider record (``CachedProvider.memo``: search
records, summaries, a root's members) with that record, which a change of
the provider replaces. Usages are never kept by the snapshot:
they are read per request, and a kept result or answer holds only while
the usages it was found with are still the database's.

Imports run one way: this package uses ``placement.objects`` (inventory,
resource_class, trait) and ``placement.db``; nothing in
``placement.objects`` imports it, and it knows nothing of HTTP (handlers,
webob).
"""
