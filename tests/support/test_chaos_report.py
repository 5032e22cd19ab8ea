"""What a chaos run's record says of each invariant: its judgement in every mix, a hold with nothing to judge named
vacuous, and a run whose mixes were mostly vacuous for an invariant says so in that invariant's verdict line."""

from __future__ import annotations

from kai_conformance.suites.support.cases.chaos import ChaosMix, ChaosQueue, ChaosWorkload
from kai_conformance.suites.support.chaos.report import judgements, over_the_run
from kai_conformance.suites.support.chaos.run import Outcome
from kai_conformance.suites.support.detectors.scale import Waiting, fitting_gangs_bound
from kai_conformance.suites.support.detectors.verdict import Verdict, vacuous

MIX = ChaosMix((ChaosQueue("q0", 8, -1),), (ChaosWorkload("w00", 2, 1, "q0"),), (), 12)
FITTING = "fitting-gangs-bound"
EMPTY = fitting_gangs_bound([], {"n0": 12}, {}, {}, {})
JUDGED = fitting_gangs_bound([Waiting("w00", 2, 8, "q0", True)], {"n0": 4, "n1": 4}, {}, {}, {})


def outcome(*verdicts: Verdict) -> Outcome:
    return Outcome(MIX, {v.detector: v for v in verdicts}, status="0 of 2 pods bound")


def test_a_mix_names_each_invariant_s_judgement_and_a_vacuous_hold_as_such() -> None:
    partial = vacuous(Verdict("gang-never-partial", True, "no gang partial"), "no pod was ever placed")
    lines = judgements(outcome(EMPTY, partial, Verdict("queue-limit", False, "q0 holds 3 GPUs, limit 2")))
    assert lines == [
        "fitting-gangs-bound held vacuously, no placeable gang waited to be judged; 12 idle GPUs (n0 12)",
        "gang-never-partial held vacuously, no pod was ever placed (no gang partial)",
        "queue-limit VIOLATED: q0 holds 3 GPUs, limit 2",
    ]
    assert outcome(EMPTY).summary() == "every invariant held (0 of 2 pods bound); vacuously: fitting-gangs-bound"
    held = judgements(outcome(JUDGED))[0]
    assert held.startswith("fitting-gangs-bound held: none of the 1 waiting gang(s) fits the 8 idle GPUs (n0 4, n1 4)")
    assert held.endswith("w00 (2×8 GPU, queue q0): the idle GPUs hold 0 of its 2 pods of 8 GPU")


def test_a_violation_is_never_marked_vacuous() -> None:
    broken = Verdict("queue-limit", False, "over")
    assert vacuous(broken, "no queue has a GPU limit") is broken


def test_a_run_mostly_vacuous_for_an_invariant_says_so_in_its_verdict_line() -> None:
    run = over_the_run([outcome(EMPTY), outcome(JUDGED), outcome(EMPTY)])[FITTING]
    assert run.ok and not run.vacuous
    assert run.explanation.startswith(
        "MOSTLY VACUOUS: held in all 3 mix(es), but vacuously (nothing to judge) in 2 of them (mix(es) 1, 3), so it "
        "was put to the test in 1 only; the last judged: none of the 1 waiting gang(s) fits"
    )
    never = over_the_run([outcome(EMPTY), outcome(EMPTY)])[FITTING]
    assert never.vacuous and "put to the test in 0 only" in never.explanation
    # the controls: a minority of vacuous mixes is counted, not headlined; none is not mentioned
    some = over_the_run([outcome(JUDGED), outcome(EMPTY), outcome(JUDGED)])[FITTING].explanation
    assert some.startswith("held in all 3 mix(es), vacuously in 1 (mix(es) 2); the last judged:")
    assert over_the_run([outcome(JUDGED)])[FITTING].explanation.startswith("held in all 1 mix(es); the last judged:")
