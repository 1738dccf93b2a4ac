"""bench/locomo_utility.py on a tiny synthetic LoCoMo-shaped file (hashing embedder, subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import locomo_utility

ROOT = Path(__file__).resolve().parents[2]


def test_evidence_ids_split_lists_and_semicolons():
    assert locomo_utility.evidence_ids({"evidence": ["D1:3", "D2:4; D2:5", "D3:1,D3:2", "bad"]}) == [
        "D1:3", "D2:4", "D2:5", "D3:1", "D3:2"]
    assert locomo_utility.evidence_ids({}) == []


@pytest.mark.slow
def test_end_to_end_reports_recall_before_and_after_and_what_was_quarantined(tmp_path):
    topics = ["sailing boats", "baking bread", "mountain hiking", "jazz piano", "chess openings", "tomato gardens"]
    samples = []
    for c in range(2):
        turns = [{"speaker": "Ann" if i % 2 else "Bob", "dia_id": f"D1:{i + 1}",
                  "text": f"I spent the weekend on {topic} with my cousin number {c}."}
                 for i, topic in enumerate(topics)]
        qa = [{"question": f"What did the speaker do with the cousin about {topic}?", "answer": topic,
               "evidence": [f"D1:{i + 1}"]} for i, topic in enumerate(topics)]
        qa.append({"question": "no evidence here", "answer": "x", "evidence": []})
        samples.append({"sample_id": f"conv-{c}", "conversation": {"speaker_a": "Ann", "speaker_b": "Bob",
                                                                  "session_1": turns}, "qa": qa})
    data, out = tmp_path / "locomo.json", tmp_path / "out.json"
    data.write_text(json.dumps(samples))
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "locomo_utility.py"), "--locomo", str(data),
                           "--embedder", "hashing", "--k", "1,5", "--workdir", str(tmp_path / "work"),
                           "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert (result["conversations"], result["turns"], result["questions"]) == (2, 12, 12)
    assert set(result["recall_at_k_before"]) == {"1", "5"} == set(result["recall_at_k_after"])
    assert result["recall_at_k_before"]["5"] >= result["recall_at_k_before"]["1"] > 0
    assert len(result["quarantined_ids"]) == result["quarantined_turns"]
    assert 0 <= result["questions_with_quarantined_evidence"] <= result["questions"]
    assert result["classifier"].startswith("ingest-classifier@")
    if result["quarantined_turns"] == 0:  # nothing quarantined: recall cannot change
        assert result["recall_at_k_after"] == result["recall_at_k_before"]
