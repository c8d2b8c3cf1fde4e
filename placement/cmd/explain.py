"""``placement-explain``: why an allocation-candidates query gets what it
gets, as a readable table, from a running placement service.

It asks ``GET /allocation_candidates/explain`` with the query given (the
query string of ``GET /allocation_candidates``) and prints the funnel of
each request group, the tree steps, the count and the named providers.
It authenticates like the OpenStack clients (``--os-auth-url``,
``--os-username``, ... or the ``OS_*`` variables, with keystoneauth1), or,
for a service without keystone, with ``--url`` and ``--token`` (noauth2:
``admin``).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse

from keystoneauth1 import adapter, exceptions, loading, session

from placement.cmd import text

PATH = "/allocation_candidates/explain"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="placement-explain",
        description="Explain the allocation candidates of a query: which constraint rules "
                    "providers out, from a running placement service.")
    parser.add_argument("query", help="the query string of GET /allocation_candidates, e.g. "
                                      "'resources=VCPU:8,MEMORY_MB:4096&required=HW_CPU_X86_AVX'")
    parser.add_argument("--provider", action="append", default=[], metavar="UUID",
                        help="also say what rules this provider (or its tree) out; repeatable")
    parser.add_argument("--os-placement-api-version", dest="microversion", default="latest",
                        help="the microversion the query is read at (default: latest)")
    parser.add_argument("--json", action="store_true", help="print the JSON answer as it is")
    parser.add_argument("--url", help="the placement endpoint, without keystone (with --token)")
    parser.add_argument("--token", help="the X-Auth-Token to send with --url "
                                        "(noauth2: 'admin')")
    parser.add_argument("--os-interface", dest="interface", default="public",
                        help="the catalog interface of the placement endpoint (keystone)")
    parser.add_argument("--os-region-name", dest="region_name", default=None,
                        help="the region of the placement endpoint (keystone)")
    loading.register_session_argparse_arguments(parser)
    loading.register_auth_argparse_arguments(parser, argv, default="password")
    return parser.parse_args(argv)


def _client(args: argparse.Namespace) -> adapter.Adapter:
    if args.url:
        return adapter.Adapter(session.Session(), endpoint_override=args.url.rstrip("/"),
                               additional_headers={"X-Auth-Token": args.token or "admin"})
    auth = loading.load_auth_from_argparse_arguments(args)
    return adapter.Adapter(loading.load_session_from_argparse_arguments(args, auth=auth),
                           service_type="placement", interface=args.interface,
                           region_name=args.region_name)


def explain(args: argparse.Namespace) -> dict:
    """The service's explanation of ``args.query``."""
    pairs = urllib.parse.parse_qsl(args.query, keep_blank_values=True)
    pairs += [("provider", uuid) for uuid in args.provider]
    response = _client(args).get(
        PATH + "?" + urllib.parse.urlencode(pairs),
        headers={"OpenStack-API-Version": f"placement {args.microversion}",
                 "Accept": "application/json"},
        raise_exc=False)
    if response.status_code != 200:
        raise RuntimeError(f"GET {PATH} answered {response.status_code}: {_error(response)}")
    return response.json()


def _error(response) -> str:
    try:
        return "; ".join(error["detail"] for error in response.json()["errors"])
    except (ValueError, KeyError, TypeError):
        return response.text[:500]


# The table ------------------------------------------------------------------

def _flow(entered: int, left: int) -> str:
    return f"{entered} -> {left}"


def _group_name(suffix: str) -> str:
    return f"group {suffix!r}" if suffix else "unsuffixed group"


def render(explanation: dict) -> str:
    """The explanation as text: a table per group, one for the trees, the
    count, and a line per named provider."""
    lines = []
    for group in explanation["groups"]:
        spread = " (may spread over a tree and sharing providers)" if group["spread"] else ""
        lines.append(f"{_group_name(group['suffix']).capitalize()}{spread}")
        rows = [["constraint", "", "providers", "trees", "ruled out by"]]
        for step in group["steps"]:
            reasons = ", ".join(f"{reason} {count}" for reason, count
                                in (step["ruled_out"] or {}).items())
            rows.append([step["constraint"], step["description"],
                         _flow(step["entered"]["providers"], step["left"]["providers"]),
                         _flow(step["entered"]["trees"], step["left"]["trees"]), reasons])
        lines += text.aligned(rows, indent="  ") if group["steps"] else ["  (no constraint)"]
        lines.append("")
    lines.append("Trees")
    rows = [["step", "", "trees", "only through sharing"]]
    for step in explanation["trees"]:
        sharing = step["only_through_sharing"]
        rows.append([step["constraint"], step["description"], _flow(step["entered"], step["left"]),
                     "" if sharing is None else str(sharing)])
    lines += text.aligned(rows, indent="  ")
    lines += ["", f"Allocation requests: {explanation['allocation_requests']}"]
    if explanation["providers"]:
        lines += ["", "Providers"]
        for provider in explanation["providers"]:
            lines.append(f"  {provider['uuid']}: {_verdict(provider)}")
    return "\n".join(lines)


def _verdict(provider: dict) -> str:
    if not provider["found"]:
        return "no such provider"
    ruled_out = provider["ruled_out"]
    if ruled_out is None:
        return f"not ruled out; in {provider['allocation_requests']} allocation request(s)"
    where = ("" if ruled_out["suffix"] is None
             else f" ({_group_name(ruled_out['suffix'])})")
    return f"ruled out by {ruled_out['constraint']}{where}: {ruled_out['detail']}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        explanation = explain(args)
    except (RuntimeError, exceptions.ClientException) as error:
        print(f"placement-explain: {error}", file=sys.stderr)
        return 1
    print(json.dumps(explanation, indent=2) if args.json else render(explanation))
    return 0


if __name__ == "__main__":
    sys.exit(main())
