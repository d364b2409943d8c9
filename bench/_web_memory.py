"""Memory of a running ``qkv serve`` after each of the page's tabs has been used once: the
proportional set size (PSS: shared pages divided among the processes mapping them) summed over the
server's whole process tree (parent, workers, heavy-pool children).

    PYTHONPATH=. .venv/bin/python bench/_web_memory.py --port 8000 --pid SERVER_PID

bench/web.py calls ``tab_by_tab`` on the server it starts; run alone, this measures a server
already running (``qkv serve --sample``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# One request per tab, as the page sends it (search with its first results explained, the match
# grid, an attention map and the tour, attributes, a summary).
TABS: list[tuple[str, str, dict]] = [
    ("search", "/api/search", {"query": "waterproof hiking boots", "k": 10, "explain": 3, "explain_detail": "grid"}),
    ("search zh", "/api/search", {"query": "透气跑鞋", "k": 10}),
    ("explain", "/api/search/explain", {"query": "waterproof hiking boots", "ids": ["__FIRST__"], "detail": "full"}),
    ("attention", "/api/attention", {"text": "Waterproof leather hiking boots with a grippy sole", "layer": 3, "head": 2}),
    ("tour", "/api/tour", {"text": "Waterproof leather hiking boots with a grippy sole", "lang": "en"}),
    ("attributes", "/api/attributes", {"titles": ["Velora men's running shoes black US 9", "Northpeak 防水登山靴 黑色 42码"]}),
    ("summary", "/api/summarize", {"reviews": [f"Review {i}: comfortable and warm, but the zipper broke after a month. "
                                               "Runs small; order a size up." for i in range(60)], "budget": 60}),
    ("summary zh", "/api/summarize", {"reviews": [f"评论{i}：穿着很舒服也很暖和，但是拉链一个月就坏了。尺码偏小，建议买大一码。"
                                                  for i in range(60)], "budget": 60}),
]


def tree_memory(pid: int) -> dict:
    """Summed PSS (MB) of the tree under ``pid`` (``qkv.web.memory.server_memory``), by role."""
    from qkv.web.memory import server_memory

    mem = server_memory(pid)
    return {"pss": mem["all"][0], "processes": mem["all"][1], "roles": {k: v for k, v in mem.items() if k != "all"}}


def _post(base: str, path: str, body: dict, timeout: float = 180) -> tuple[int, dict]:
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    for _ in range(20):
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            if e.code in (429, 503):  # as the page does: wait and retry
                time.sleep(float(e.headers.get("Retry-After") or 1))
                continue
            return e.code, {}
    return 503, {}


def tab_by_tab(base: str, server_pid: int, settle: float = 2.0) -> list[dict]:
    """Use each tab once, in turn (each request twice, so that both workers, which the kernel picks
    at random, are likely to have served it, and both of their heavy-work children); the tree's memory after each."""
    rows = [{"after": "start", **tree_memory(server_pid)}]
    first = None
    for name, path, body in TABS:
        if body.get("ids") == ["__FIRST__"]:
            body = {**body, "ids": [first or "1"]}
        codes = []
        for _ in range(2):
            code, answer = _post(base, path, body)
            codes.append(code)
            if path == "/api/search" and first is None and answer.get("results"):
                first = str(answer["results"][0]["id"])
        time.sleep(settle)
        rows.append({"after": name, "codes": codes, **tree_memory(server_pid)})
    return rows


def show(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        each = ", ".join(f"{k} {mb:.0f} ({n})" for k, (mb, n) in r["roles"].items())
        lines.append(f"after {r['after']:<11} {r['pss']:7.0f} MB PSS in {r['processes']} processes"
                     f"{' ' + str(r['codes']) if 'codes' in r else ''}  [{each}]")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--pid", type=int, required=True, help="the qkv serve process")
    args = ap.parse_args()
    print(show(tab_by_tab(f"http://127.0.0.1:{args.port}", args.pid)))


if __name__ == "__main__":
    main()
