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


def test_corrections_in_the_words_of_the_second_tuning_set_and_chat_that_only_sounds_like_one():
    """bench/correction_eval.py tune2 (the first HOLDOUT, its 17 misses read on 2026-12-05): a
    record revised or fixed, "recorded in error", "I had it down as", "I misread", a figure in
    last month's notes, a CRM note contradicted; and LoCoMo chat the contrast rule took for a
    correction ("No, not yet", "Wow, not bad"), and a teacher who corrected essays."""
    for text in ('Pt allergy list amended: penicillin allergy confirmed; the "NKDA" entry was recorded in error.',
                 "Memory revised: the user is pescatarian, contrary to the earlier note.",
                 "actually the game is saturday the 9th, i had it down as friday",
                 "Turns out the book is due on the 18th, I misread the receipt the first time.",
                 "Marketing budget is $42k; disregard the $55k figure in last month's notes.",
                 "Invoice total is $1,842.50; the previously recorded $1,482.50 was a transposition error.",
                 'Not sure why I wrote "Grandma Ruth", it\'s Grandma Rose. Fixing that.',
                 "Decision-maker is Luis Ortega (VP Ops), not Karen Wu as stated in the earlier CRM note."):
        assert says_corrected(text), text
    for text in ("No, not yet. I want to solidify the plan first.", "Wow, not bad, what happened to the old one?",
                 "Dad corrected essays at the kitchen table every night.",
                 "It's awesome when you trust the people fixing it.",
                 "The bank clerk fixed a typo on the loan form before we signed."):
        assert not says_corrected(text), text


def test_a_yes_or_no_contrasted_with_the_earlier_notes_is_a_value_not_a_way_of_speaking():
    """TUNE hotpot-clean-plain: "… is yes, not what the earlier notes say." is a correction
    (its value is "yes"); chat's "No, not yet" is not."""
    assert says_corrected("Turns out both, Dictyosperma, Huernia, described is yes, not what the earlier notes say.")
    assert not says_corrected("No, not yet. I want to solidify the plan first.")
