"""Re-capture the LLDP fixtures in tests/fixtures/discovery/lldp/ from real lldpd daemons.

Run as root with lldpd installed::

    python tests/discovery/capture_lldp_fixtures.py

Lab: switches leaf-a and leaf-b (lldpd, port ids = interface names, bridge capability), a switch
namespace without lldpd, and a node n1 cabled ens1f0→leaf-a:a-p1, ens1f1→leaf-b:b-p1,
ens2f0→leaf-a:a-p2, ens2f1→leaf-b:b-p2, ens4f0→(silent switch). A second node n2 has one cable
(ens1f0→leaf-a:a-p3), which shows how plain ``-f json`` collapses one-element lists.

``*.json0`` are ``lldpcli -f json0 show neighbors`` outputs, ``*.json`` the plain ``-f json``
ones (kept to show the shape the parser must refuse). A node n3 without cables gives
``empty.json0``. The kernel string of the capturing machine in chassis descriptions is left as
captured.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for tests.discovery

from tests.discovery.lldp_lab import LldpLab, lab_unavailable_reason

OUT = Path(__file__).parent.parent / "fixtures" / "discovery" / "lldp"


def _interfaces(text: str) -> list[dict[str, object]]:
    doc = json.loads(text)
    return list(doc["lldp"][0].get("interface", []))


def main() -> int:
    reason = lab_unavailable_reason()
    if reason:
        print(reason, file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    with LldpLab() as lab:
        lab.add_switch("la", "leaf-a")
        lab.add_switch("lb", "leaf-b")
        lab.add_switch("dead", "silent", lldpd=False)
        lab.add_node("n1")
        lab.add_node("n2")
        lab.cable("n1", "ens1f0", "la", "a-p1")
        lab.cable("n1", "ens1f1", "lb", "b-p1")
        lab.cable("n1", "ens2f0", "la", "a-p2")
        lab.cable("n1", "ens2f1", "lb", "b-p2")
        lab.cable("n1", "ens4f0", "dead", "x-p1")
        lab.cable("n2", "ens1f0", "la", "a-p3")
        lab.add_node("n3")  # no cable: its table stays empty
        lab.start()
        deadline = time.monotonic() + 60
        while len(_interfaces(lab.neighbors_text("n1"))) < 4 or len(_interfaces(lab.neighbors_text("n2"))) < 1:
            if time.monotonic() > deadline:
                print("LLDP did not converge", file=sys.stderr)
                return 1
            time.sleep(0.2)
        for fmt in ("json0", "json"):
            (OUT / f"node-four-nics.{fmt}").write_text(lab.neighbors_text("n1", fmt))
            (OUT / f"node-one-nic.{fmt}").write_text(lab.neighbors_text("n2", fmt))
        (OUT / "empty.json0").write_text(lab.neighbors_text("n3"))
    print(f"written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
