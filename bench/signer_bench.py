"""Per-entry signing cost: the epoch key on a PKCS#11 token (SoftHSM2) vs the in-memory online key.

    SOFTHSM2_CONF=... .venv/bin/python -m bench.signer_bench [--n 2000]

Creates a throwaway SoftHSM2 token (``softhsm2-util``) unless ``--module/--token/--pin`` name one,
signs genesis entries (``sign_entry``, the write path's signing step) with each signer and prints
microseconds per entry. No Django, no database.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from ledger.core.canonical import format_time, now_utc
from ledger.core.entries import GENESIS, genesis_body, sign_entry
from ledger.core.keys import Ed25519Signer, generate_keypair
from ledger.keystore import Pkcs11KeyStore

MODULE = "/usr/lib/softhsm/libsofthsm2.so"


def _per_entry(signer, n: int) -> float:
    t = format_time(now_utc())
    bodies = [genesis_body("bench", "main", f"m{i}", "ab" * 32, 1000, signer.epoch, t) for i in range(n)]
    t0 = time.perf_counter()
    for b in bodies:
        sign_entry(GENESIS, b, signer)
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--module", default=MODULE)
    ap.add_argument("--token", default="")
    ap.add_argument("--pin", default="1234")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        token = args.token
        if not token:
            (Path(tmp) / "tokens").mkdir()
            conf = Path(tmp) / "softhsm2.conf"
            conf.write_text(f"directories.tokendir = {tmp}/tokens\nobjectstore.backend = file\nlog.level = ERROR\n")
            os.environ["SOFTHSM2_CONF"] = str(conf)
            token = f"bench-{uuid.uuid4().hex[:8]}"
            subprocess.run(["softhsm2-util", "--init-token", "--free", "--label", token, "--pin", args.pin,
                            "--so-pin", "0000"], check=True, capture_output=True)
        store = Pkcs11KeyStore(Path(tmp) / "keys", module=args.module, token_label=token, pin=args.pin)
        store.init("bench")
        hsm = store.signer("bench")
        online = Ed25519Signer(generate_keypair()[0], 1)
        _per_entry(online, 200)
        _per_entry(hsm, 50)  # warm both
        us_hsm = _per_entry(hsm, args.n)
        us_online = _per_entry(online, args.n * 10)
    print(f"per-entry signing (sign_entry, genesis body), n={args.n}:")
    print(f"  epoch key on PKCS#11 token (SoftHSM2, CKM_EDDSA): {us_hsm:8.1f} us/entry")
    print(f"  online key in memory (PyNaCl Ed25519):            {us_online:8.1f} us/entry")
    print(f"  ratio: {us_hsm / us_online:.0f}x; a 500-memory genesis batch signs in "
          f"{us_hsm * 500 / 1000:.0f} ms (HSM) vs {us_online * 500 / 1000:.1f} ms (online key)")


if __name__ == "__main__":
    main()
