"""Pure decisions of the supervisor: rows, evidence and `now` in; frozen results out.

Packages, each importing only this package and the standard library:

* ``identity/``: who a worker is (instance ids, launch-derived ids, the exec marker).
* ``fleet/``: the fleet as it is (liveness, per-row views, findings, snapshot, orphans).
* ``retirement/``: the plain planner (``planner.py``) and the conjunction it applies
  (``conjunction.py``), the tokens, the apply rules and the plan's pages.
* ``incremental/``: plan speed only; wraps the plain planner, property-tested equal.
* ``control/``: the control plane (work leases, allocation, namespace health,
  incident links, permissions).

At the top: the shared vocabulary (``canonical``, ``stamps``, ``evidence``,
``fast_init``) and ``render``, the JSON-ready views of all of the above.
"""
