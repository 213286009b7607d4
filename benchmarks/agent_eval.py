"""The agent evaluation: scenarios a person would try, run through the real `iriis serve` with
the local model (or the provider the environment configures), judged by outcomes read back
from the server. Prints one JSON line; every scenario's record goes to a JSON-lines results file
that notebooks/evaluation.ipynb reads.

    .venv/bin/python benchmarks/agent_eval.py                       # the visible set, memory on
    .venv/bin/python benchmarks/agent_eval.py --memory both         # on, then off: what memory adds
    .venv/bin/python benchmarks/agent_eval.py --scenarios mine.yaml --only reminders,welcome
    .venv/bin/python benchmarks/agent_eval.py --provider env        # OPENAI_* from the environment
    .venv/bin/python benchmarks/agent_eval.py --url http://127.0.0.1:8000 --key KEY   # a running server
    .venv/bin/python benchmarks/agent_eval.py --scenarios benchmarks/scenarios/accounts.yaml   # mail, calendar

Scenarios on the owner's mail and calendar (category mail or calendar, `accounts: true`, or a
mail or event check) run against test accounts this script starts (Dovecot with an SMTP server,
Radicale: benchmarks/evalkit/accounts.py), given to the server it starts with the shipped
mcp.yaml's `mail` and `calendar` entries, in the seed's time zone (Europe/Paris); each such
scenario starts from the seeded mailbox and calendar again.

The scenario format is benchmarks/SCENARIOS.md. Nothing here knows a scenario's wording: each
check reads a reminder, a memory item, a file, the audit or the reply, as the scenario says.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.evalkit.accounts import EvalAccounts  # noqa: E402
from benchmarks.evalkit.runner import Runner  # noqa: E402
from benchmarks.evalkit.scenario import Scenario, load  # noqa: E402
from benchmarks.evalkit.summary import summarize  # noqa: E402

DEFAULT_SCENARIOS = REPO / "benchmarks" / "scenarios" / "visible.yaml"
RESULTS = REPO / "benchmarks" / "results"
MODELS = REPO / ".venv" / "iriis-models"
KEY = "agent-eval-owner-key"
PIN = "2468"


def _env(memory: bool, provider: str, model: str | None, home: Path) -> dict[str, str]:
    keep_provider = provider == "env"
    drop = [k for k in os.environ if k.startswith(("IRIIS_", "OPENAI_")) or k in ("DATABASE_URL", "RAY_ADDRESS")]
    env = {k: "" for k in drop if not (keep_provider and (k.startswith("OPENAI_") or k == "IRIIS_CHAT_MODEL"))}
    env.update({"IRIIS_OWNER_KEYS": KEY, "IRIIS_MODELS_DIR": str(MODELS), "IRIIS_MEMORY": "on" if memory else "off",
                "IRIIS_LOCAL_DEBUG": str(home / "prompts.jsonl"), "IRIIS_PROVIDER_TIMEOUT": "120"})
    if model:
        env["IRIIS_LOCAL_MODEL"] = model
    if not memory:
        # Memory off is the tools too: the same mcp.yaml without its memory server.
        import yaml

        config = yaml.safe_load((REPO / "mcp.yaml").read_text())
        config["servers"].pop("memory", None)
        (home / "mcp.yaml").write_text(yaml.safe_dump(config))
        env["IRIIS_MCP_CONFIG"] = str(home / "mcp.yaml")
    return env


@contextmanager
def _accounts(scenarios: list[Scenario]) -> Iterator[EvalAccounts | None]:
    """The owner's test mail and calendar, started when any of `scenarios` needs them."""
    if not any(s.needs_accounts for s in scenarios):
        yield None
        return
    accounts = EvalAccounts()
    try:
        yield accounts.start()
    finally:
        accounts.close()


def _local_ready(client: httpx.Client, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    row: dict[str, Any] = {}
    while time.monotonic() < deadline:
        rows = client.get("/v1/providers").json()["data"]
        local = [r for r in rows if r["key"].startswith("local/")]
        if not local or local[0]["state"] == "ready":
            return local[0] if local else {}
        row = local[0]
        print(f"agent_eval: waiting for the local model: {row.get('state')} {row.get('detail', '')}"[:160],
              file=sys.stderr)
        time.sleep(5)
    raise RuntimeError(f"the local model was not ready within {timeout:.0f} s: {row}")


def _first_message(runner: Runner) -> float | None:
    """The first sentence of the first message sent the moment the server said it serves."""
    from benchmarks.evalkit.scenario import Step

    return runner.send(Step(say="What is 15% of 80?", conversation="first"), None, None).first_sentence_s


def run_mode(scenarios: list[Scenario], memory: bool, args: argparse.Namespace, out: Any) -> list[dict[str, Any]]:
    from tests.server_proc import IRIIS, ServerProcess

    picked = [s for s in scenarios if s.memory in ("any", "on" if memory else "off")]
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="agent-eval-") as tmp, _accounts(picked) as accounts:
        home = Path(tmp)
        server = None
        if args.url:
            url, key = args.url, args.key
        else:
            env = {**_env(memory, args.provider, args.model, home), **(accounts.env() if accounts else {})}
            server = ServerProcess(home / "home", env).start()
            url, key = server.url, KEY
            subprocess.run([str(IRIIS), "pin", "set", "--stdin"], input=f"{PIN}\n", env=server.env, check=True,
                           capture_output=True, text=True, timeout=60)
        client = httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {key}"})
        try:
            # The owner's time zone, as the server's tools read it (UTC unless IRIIS_TIMEZONE says;
            # the test accounts' seed zone when they are on).
            tz = accounts.zone if accounts else os.environ.get("IRIIS_TIMEZONE") or "UTC"
            runner = Runner(client, memory=memory, pin=PIN, tz=tz, accounts=accounts)
            first = _first_message(runner) if server is not None else None
            ready = _local_ready(client, args.ready_timeout)
            for n, scenario in enumerate(picked, 1):
                record = runner.run(scenario)
                record.update({"run": args.run_id, "model": ready.get("key") or args.provider,
                               "first_after_serving_s": first})
                records.append(record)
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                out.flush()
                mark = "ok  " if record["ok"] else "FAIL"
                failed = "; ".join(c["why"] for c in record["checks"] if not c["ok"])[:200]
                print(f"agent_eval [{'on' if memory else 'off'}] {n}/{len(picked)} {mark} {scenario.id} "
                      f"({record['seconds']:.0f} s) {failed}", file=sys.stderr)
        finally:
            client.close()
            if server is not None:
                server.kill()
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", action="append", help="a scenario file (YAML); may repeat")
    parser.add_argument("--memory", choices=("on", "off", "both"), default="on")
    parser.add_argument("--only", default="", help="comma-separated ids, categories or tags")
    parser.add_argument("--provider", choices=("local", "env"), default="local",
                        help="local: the local model, no key; env: the OPENAI_* provider of the environment")
    parser.add_argument("--model", default=None, help="IRIIS_LOCAL_MODEL (default: the server's default)")
    parser.add_argument("--url", default=None, help="use this running server instead of starting one")
    parser.add_argument("--key", default=None, help="its owner key (with --url)")
    parser.add_argument("--results", default=None, help="the JSON-lines results file to write")
    parser.add_argument("--ready-timeout", type=float, default=900.0)
    args = parser.parse_args()
    args.run_id = time.strftime("%Y%m%dT%H%M%S")
    files = args.scenarios or [str(DEFAULT_SCENARIOS)]
    scenarios = [s for f in files for s in load(f)]
    if args.only:
        wanted = {w.strip() for w in args.only.split(",") if w.strip()}
        scenarios = [s for s in scenarios if s.id in wanted or s.category in wanted or wanted & set(s.tags)]
    if args.url and any(s.needs_accounts for s in scenarios):
        parser.error("the mail and calendar scenarios need the test accounts, which only a server this script "
                     "starts is given: leave out --url, or pick other scenarios with --only")
    RESULTS.mkdir(exist_ok=True)
    path = Path(args.results) if args.results else RESULTS / f"agent_eval-{args.run_id}.jsonl"
    began = time.monotonic()
    records: list[dict[str, Any]] = []
    with path.open("a", encoding="utf-8") as out:
        for memory in {"on": [True], "off": [False], "both": [True, False]}[args.memory]:
            records += run_mode(scenarios, memory, args, out)
    line = summarize(records)
    line.update({"benchmark": "agent_eval", "scenario_files": files, "results": str(path),
                 "wall_s": round(time.monotonic() - began, 1)})
    print(json.dumps(line))


if __name__ == "__main__":
    main()
