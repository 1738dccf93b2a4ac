"""How well the verdict reads corrections in plain notes (`audits/engine/correction_words.py`, issue 16).

A plain note has no metadata: whether a later record *corrects* an earlier one (the earlier one is
then an outdated record, a correction and not a poison suspect) is read from its words alone. The
sets below were written by a model that never saw the rules (a helper agent told not to read the
repository), in three rounds:

- ``TUNE`` (2026-12-05, 30 corrections, 30 hard negatives): read while the rules were written.
- ``HOLDOUT`` (2026-12-05, 40 + 40, written by another helper into a file, committed here before
  it was read or scored): measured once (session 08:52); its misses were read in the session of
  11:30, so it is a tuning set since (``tune2``).
- ``HOLDOUT2`` (2026-12-05, 80 + 80, ``correction_sets/holdout2.json``, written by a third helper
  told not to read the repository, committed before it was read or scored): never tune on it;
  this script scores it and never prints its notes.

Hard negatives use the same vocabulary (earlier, previous, wrong, typo, update, no longer, ...) in
an ordinary sense. Usage::

    .venv/bin/python bench/correction_eval.py [--json out.json]

prints, per set, the corrections read as corrections and the hard negatives read as corrections.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audits.engine.correction_words import says_corrected  # noqa: E402

TUNE_CORRECTIONS = (
    "Correction: Maya's birthday is March 14, not March 4. I had the day wrong.",
    "Update to my previous note: the dentist moved Lena's cleaning to Thursday at 3:30pm.",
    'Scratch what I saved before about the Wi-Fi password; it\'s "bluefern42" now.',
    "Dr. Patel's office is at 220 Elm St, Suite 4. The address I had stored is out of date.",
    "Ignore the old entry, Tom's new cell number is 555-0142.",
    '2024-05-02 FIX: metformin 1000 mg twice daily (prev. logged as 500 mg).',
    'User clarified their cat Biscuit is female; my earlier memory listing Biscuit as male was incorrect.',
    'Amended record: the weekly standup now begins at 9:45 a.m., superseding the 9:15 time noted previously.',
    'Heads up, I mixed it up last time: rent is $1,650 a month.',
    'The project targets Python 3.12 now; disregard whatever version I wrote down before.',
    'Sister\'s name is spelled "Katheryn". The spelling in my notes was a typo.',
    'Per user: flight home is on the 22nd. This replaces the date saved last week.',
    'Revised: gym membership is $39/month, not $29 as I originally wrote.',
    'My mistake in the last summary: the user is vegetarian, not vegan.',
    "Landlord's email is now j.ortiz@mailbox.net; the address on file is stale.",
    'Oops, got that wrong: Sam works at Northwind, not Contoso.',
    'The correct value for the API rate limit is 600 requests/minute; the prior figure should not be relied on.',
    "Retracting my earlier note about the date: Grandpa's surgery is scheduled for June 9.",
    'Errata: the library book is due back Oct 3, not on the date the reminder gave.',
    "User pointed out I'd saved the wrong zip code; it's 02139.",
    'Rex weighed 24 kg at the last vet visit (supersedes the weight logged in March).',
    'No, school pickup on Wednesdays is at 2:50. That other note was off.',
    'Turns out the conference is in Lisbon, not Porto; fixing what I had.',
    'Record updated to show the lease ends August 31; the prior entry contained an error.',
    'Memory corrected: the user goes by "Alex", and the nickname stored in memory should no longer be used.',
    'Our team lead is Priya Shah now; the old note naming Marco is out of date.',
    'Overwrite the dosage entry: insulin glargine is 12 units at bedtime.',
    "Just to set the record straight, the car's last oil change was in February. I'd noted it wrongly.",
    "Thermostat schedule changed, so the saved 68°F setting is obsolete; it's 70°F now.",
    "Note to self: I misremembered. Jenna's allergy is to tree nuts, not peanuts.",
)

TUNE_NEGATIVES = (
    'She made a mistake on the chemistry exam but still passed.',
    'The earlier train was cancelled due to snow, so we took the bus.',
    "Dad's old car finally sold to a neighbor for $2,000.",
    'The previous owners left a piano in the basement.',
    'Marta is a former teacher who now runs a bakery on Fifth Street.',
    'I need to update my passport before the trip in July.',
    'The recipe says the butter should be soft before mixing.',
    'He actually enjoyed the opera more than he expected to.',
    'The revised edition of the textbook has two extra chapters on genetics.',
    'The plumber fixed the leak under the kitchen sink on Tuesday.',
    'Make sure to use the correct form when filing the tax extension.',
    'The corner store no longer sells that brand of oat milk.',
    'Our old neighborhood had a great taco place on the corner.',
    'The error message said the disk was full, so I deleted some videos.',
    'Jonah changed jobs in 2021 and moved to Denver.',
    'The new puppy is named Pickle and loves chewing socks.',
    'Grandma keeps a box of outdated road maps in the attic for nostalgia.',
    'The earlier meeting ran long, so lunch got pushed to 1:30.',
    'At the closing, the bank clerk fixed a typo on the loan form before we signed.',
    "The app's latest update added a dark mode and a widget.",
    'Leo gave the wrong answer on purpose to make the class laugh.',
    'Previously a nurse, Aisha switched to software engineering last year.',
    "The museum's new wing opens to the public on May 5.",
    'It was wrong of me to skip her recital, and I told her so.',
    'The old bridge over the river was replaced in 2019.',
    'User prefers decaf after 2pm because caffeine used to keep them up at night.',
    "Kids' soccer games are always before noon on Saturdays.",
    'The city revised its recycling rules to accept glass again.',
    'The fixed-rate mortgage is 6.1% for 30 years.',
    'Before moving to Ohio, the user lived in Chicago for six years.',
)

HOLDOUT_CORRECTIONS = (
    "Correction: Maya's birthday is March 14, not March 4. The earlier note had a typo.",
    "The user's dog Biscuit is actually a beagle mix, not a basset hound as previously saved.",
    'Update to prior entry: the flight to Lisbon departs 07:45 on June 12 from Terminal 2; disregard the 9:10 time noted before.',
    "Scratch what I wrote last week about the mortgage rate, it's fixed at 5.125% for 30 years.",
    'Pt allergy list amended: penicillin allergy confirmed; the "NKDA" entry was recorded in error.',
    'The user now works at Brightline Logistics as an operations manager; the memory saying they work at Hertz is out of date.',
    'db-prod-03 runs PostgreSQL 15.4 since the upgrade; the previous log line listing 14.2 is superseded.',
    'Order #48213 ships to 22 Alder Lane, Unit 5B. The address on file before was missing the unit number and should not be used.',
    "My mistake earlier: Sam's piano lessons are Thursdays at 4:30, not Tuesdays.",
    'The user\'s preferred name is "Kit", not "Katherine"; this replaces the older memory.',
    'Ignore the old note, the gym closes at 10 pm on weekdays now, not 11.',
    "Contact record fix: Dana Reyes's direct line is 555-0187; the number logged in March belonged to her assistant.",
    'actually the celtics game is saturday the 9th, i had it down as friday',
    'Memory revised: the user is pescatarian and eats fish, contrary to the earlier "strict vegan" note.',
    "Erratum: school starts at 8:05 am this year, so last year's 8:20 start time no longer applies.",
    "Emma's shoe size is 2 now, not 13. Old entry is stale.",
    'Invoice INV-2219 total is $1,842.50; the previously recorded $1,482.50 was a transposition error.',
    'The user clarified that their sister lives in Denver, not Boulder, so any earlier assumption about Boulder should be dropped.',
    'Ticket 7731 root cause: expired TLS cert on the load balancer, NOT the DNS misconfiguration noted in the initial triage.',
    "Dr. Patel's office moved to Suite 310 at 400 Elm St; the suite number I had saved is obsolete.",
    'Corrected dosage: metformin 1000 mg twice daily (replaces prior entry of 500 mg).',
    'I was wrong about the car registration. It expires in October, not August.',
    "Wifi password at the cabin is pinecone42, the one I saved before was last year's.",
    'Per call with client 5/3: decision-maker is Luis Ortega (VP Ops), not Karen Wu as stated in the earlier CRM note.',
    "The user's anniversary is September 21; a previous memory had the 12th, which was incorrect.",
    'Retracting my prior answer: the latest stable release is 3.2.1, since 3.3.0 is still only a release candidate.',
    "Hotel confirmation for Kyoto is KX-90412. The number listed earlier was for the cancelled booking, don't use it.",
    'Luna (cat) is spayed; remove the "intact" flag from the previous vet note.',
    'heads up, that reminder from last week was off: dentist got moved to Wed 2pm',
    'Rent is paid on the 1st via autopay from the credit union account; the note about paying by check on the 5th is out of date.',
    'Amended record: employee start date is 2023-02-13 (HR had entered 2023-03-13 by mistake).',
    'Not sure why I wrote "Grandma Ruth", it\'s Grandma Rose. Fixing that.',
    'Soccer practice is now at Riverside Park, Field 3; this supersedes the Lincoln Field location listed before.',
    'The user drives a 2019 Subaru Outback. The stored memory about a Honda CR-V refers to a car they have since sold.',
    'Backup job runs at 02:30 UTC, not local time; the runbook line I added earlier was misleading.',
    "Correction to yesterday's entry: BP reading was 128/82, not 182/82.",
    "User's timezone is America/Chicago after the move; delete the stale Eastern time setting.",
    'Turns out the library book is due on the 18th, I misread the receipt the first time.',
    'Jake is allergic to tree nuts only and peanuts are fine; what I logged before overstated it.',
    "Marketing budget for Q3 is $42k after the revision; disregard the $55k figure in last month's notes.",
)

HOLDOUT_NEGATIVES = (
    'The earlier flight to Denver was full, so we booked the 3:15 pm one instead.',
    'Grandpa worked as a typesetter before he retired, and he still spots typos on every restaurant menu.',
    'The previous owner of the house left the original hardwood floors under the carpet.',
    'The user likes to update their running log every Sunday evening.',
    'Facilities meeting: the team discussed replacing the old HVAC units in Building C next fiscal year.',
    'Her former roommate Priya is getting married in Austin in October.',
    'The printer on floor 2 shows "Error 49" when someone sends very large PDFs; restarting it clears the message.',
    'The user is working with a coach to correct their golf slice by changing their grip.',
    "Maya's new puppy is a 10-week-old corgi named Waffles.",
    'The plumber fixed the leak under the kitchen sink on Tuesday; invoice paid.',
    'The user joked that they actually like Mondays because the office is quiet.',
    'Patient reports the rash has changed in color from red to light brown over two weeks.',
    "The user's grandmother no longer drives, so the family takes turns bringing her to church.",
    'The revised 4th edition of the textbook is required for Bio 201 this semester.',
    'The kids played spot-the-mistake puzzles on the long drive to Maine.',
    'Backup policy: snapshots older than 30 days are deleted automatically.',
    "The user's favorite movie is The Prestige, and they have seen it at least five times before.",
    'Deploy log 14:02: nginx config updated to enable gzip on static assets as planned.',
    'The original plan for the wedding was a beach ceremony, and the couple kept it.',
    'Cache entries are marked stale after 5 minutes and refreshed in the background.',
    'The kitchen clock is set five minutes off on purpose so the user leaves on time.',
    'Prior to the procedure, patient was instructed to fast for 12 hours.',
    'Client mentioned they replaced their old CRM vendor last year and are happy with the switch.',
    'Mom keeps her old letters from Dad in a shoebox in the hall closet.',
    "The user's son is now in fourth grade at Maple Elementary and loves his teacher.",
    'The outdated wiring in the garage is scheduled for inspection on the 20th.',
    'During exams the user drinks not coffee but yerba mate, saying it is gentler on their stomach.',
    'Ticket 8820: customer typed the wrong password too many times and was locked out; account unlocked after ID check.',
    "The team's former captain now coaches the under-12 squad on Saturdays.",
    'The user has kept the same phone number since before college.',
    'Changed the oil in the Civic at 45,200 miles; next change due at 50,200.',
    'The obsolete fax machine is still in the storage room if anyone wants it for the museum display.',
    'Earlier today the user went for a 5k run and said they felt great.',
    'The user says the biggest error in their thesis defense was running over time, a lesson they still bring up.',
    "The bakery's new sourdough recipe uses a 48-hour ferment.",
    'Dad corrected essays at the kitchen table every night when he taught high school English.',
    "The user's previous job was in retail banking, which is why they are comfortable with compliance work.",
    'Lab results: fasting glucose 94 mg/dL, within normal range; no changes to medication.',
    'Quarterly report: revenue was up 8% over the prior quarter.',
    "The user's fixed-rate savings bond matures in May 2027.",
)

HOLDOUT2 = Path(__file__).resolve().parent / "correction_sets" / "holdout2.json"


def _holdout2() -> tuple[tuple[str, ...], tuple[str, ...]]:
    d = json.loads(HOLDOUT2.read_text())
    return tuple(d["corrections"]), tuple(d["hard_negatives"])


SETS = {"tune": (TUNE_CORRECTIONS, TUNE_NEGATIVES), "tune2": (HOLDOUT_CORRECTIONS, HOLDOUT_NEGATIVES),
        "holdout2": _holdout2()}


def score(corrections: tuple[str, ...], negatives: tuple[str, ...]) -> dict:
    return {"corrections": len(corrections), "read": sum(1 for t in corrections if says_corrected(t)),
            "negatives": len(negatives), "false": sum(1 for t in negatives if says_corrected(t))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the figures here")
    a = ap.parse_args(argv)
    out = {name: score(*sets) for name, sets in SETS.items()}
    print("| set | corrections read | hard negatives read as corrections |")
    print("|---|---|---|")
    for name, r in out.items():
        print(f"| {name} | {r['read']} / {r['corrections']} | {r['false']} / {r['negatives']} |")
    if a.json:
        a.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
