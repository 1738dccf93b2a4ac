"""Corrections read from a plain note's words (engine/correction_words.py, issue 16)."""

from __future__ import annotations

from audits.engine.correction_words import corrects, says_corrected


def test_corrections_are_read_by_what_they_say_of_the_earlier_record():
    for text in ("Update on X: it is 3 now; the earlier notes were outdated.",
                 "Q: q\nA: 3\nCorrection: earlier notes said 2; that was outdated.",
                 "The previous figure was wrong: it is 3.", "Erratum: the date is 1902.",
                 "It is 3; the older entry is incorrect.", "Heads up, I mixed it up last time: rent is $1,650.",
                 "Rex weighed 24 kg (supersedes the weight logged in March).",
                 "Maya's birthday is March 14, not March 4."):
        assert says_corrected(text), text
    for text in ("The earlier edition sold well.", "He was wrong-footed in the first round.",
                 "She wrote it before the war; the draft is lost.", "The old bridge was replaced in 2019.",
                 "The plumber fixed a typo on the form before we signed.", "I need to update my passport before July."):
        assert not says_corrected(text), text


def test_a_correction_may_name_the_wrong_value_but_not_give_it_as_its_own():
    assert corrects("2024-05-02 FIX: metformin 1000 mg twice daily (prev. logged as 500 mg).", "500 mg")
    assert corrects("Correction: Maya's birthday is March 14, not March 4.", "March 4")
    assert corrects("Our team lead is Priya now; the old note naming Marco is out of date.", "Marco")
    assert corrects("The earlier notes were outdated: it is one year.", "Drums")
    # The claim is the corrected value itself: the record corrects towards it, not away from it.
    assert not corrects("Correction: Jolene has had Drums all along; the earlier note was wrong.", "Drums")
    assert not corrects("Jolene has had Seraphim for one year.", "Drums")
