"""Kafka's known differences as data, and ``--allow``: exactly those, each one reported.

The catalog (``kpurgatory.spec.known_differences``) must agree with docs/spec.md's
**Kafka** notes and use only names the kit understands. A Kafka-like variant of the
reference (``tests/conformance/kafka_like.py``, behind ``broken_adapter.py --bug
kafka``) reproduces each documented behaviour: with one difference switched on, the
vectors that show it fail, still fail when every *other* difference is allowed, and
pass with ``--allow <that id>``, which the report names at the steps it was needed.
The two differences no committed vector reaches (a closed timer, negative clock
readings) are checked on a ``--replay`` sequence.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import sys
from pathlib import Path
from types import ModuleType

import pytest

from kpurgatory.conformance.adapter import DEFAULT_VECTORS_DIR, STEP_KINDS, vector_paths
from kpurgatory.conformance.differences import PURGATORY_STATE_FIELDS, Judge
from kpurgatory.conformance.driver import DriverSide, Observation, State, run_steps
from kpurgatory.conformance.stateful import run_stateful
from kpurgatory.conformance.steps import Add, Advance, Init, Shutdown, Step, Watch, step_to_json
from kpurgatory.spec.known_differences import (
    CONDITIONS,
    KAFKA,
    KAFKA_NOTES_NOT_OBSERVED,
    KNOWN_DIFFERENCES,
    OBSERVATION_FIELDS,
    known_difference,
    resolve,
)
from kpurgatory.spec.rules import RULES
from tests.conformance.support import BROKEN, ROOT, conformance

SPEC = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
IDS = [difference.id for difference in KNOWN_DIFFERENCES]

SHOWN_BY_VECTORS: dict[str, list[str]] = {
    "kafka-stale-current-time": ["r02-current-time", "adversarial-tiny-s1-n40"],
    "kafka-flush-current-time": ["r11-cancel-before-turn"],
    "kafka-advance-result": ["r08-advance-result", "r09-cancel-readd", "r29-cancel-for-key"],
    "kafka-negative-timeout": ["r35-inputs"],
    "kafka-duplicate-keys": ["r24-keys", "mixed_cancel-tiny-s1-n12"],
    "kafka-after-shutdown": ["r32-shutdown-timer-disabled-resubmit"],
    "kafka-resubmission": ["r32-shutdown-timer-disabled-resubmit", "repeated-watch"],
    "kafka-cancel-keeps-watch": ["r40-cancel-submitted"],
    "kafka-after-close": ["r14-closed-timer", "on-run-stops-at-exception"],
}
"""Each difference a committed vector shows, with the vectors that show it."""

SHOWN_BY_SEQUENCES: dict[str, list[Step]] = {
    "kafka-after-close": [Init(), Shutdown(), Add("t", 5), Advance(10)],
    "kafka-truncating-division": [
        Init(tick_ms=10, clock_ms=-15, start_ms=-15),
        Add("u", 6),  # expiration -9: due -10 here, 0 with truncation
        Advance(5),
        Advance(10),
    ],
}
"""The differences no committed vector reaches, with a sequence that shows each."""


def kafka_adapter(differences: str) -> str:
    return shlex.join([sys.executable, str(BROKEN), "--bug", "kafka", "--differences", differences])


def vectors_args(names: list[str]) -> list[str]:
    return [
        arg for name in names for arg in ("--vectors", str(DEFAULT_VECTORS_DIR / f"{name}.json"))
    ]


# ---- the catalog ---------------------------------------------------------------------------


def test_catalog_uses_known_rules_kinds_fields_and_conditions() -> None:
    rule_ids = {rule.id for rule in RULES}
    assert len(set(IDS)) == len(IDS)
    for difference in KNOWN_DIFFERENCES:
        assert re.fullmatch(r"kafka-[a-z-]+", difference.id), difference.id
        assert difference.rule in rule_ids, difference.id
        assert difference.shows_on and difference.shows_on <= set(STEP_KINDS), difference.id
        assert difference.fields and difference.fields <= OBSERVATION_FIELDS, difference.id
        assert difference.later <= OBSERVATION_FIELDS, difference.id
        assert difference.when in CONDITIONS, difference.id
        assert "\n" not in difference.summary and len(difference.summary) <= 80


def _kafka_notes(text: str) -> list[str]:
    """Every Kafka note of a spec text: a paragraph or a line that starts with
    ``**Kafka**`` or ``Kafka:`` (the two ways a note has been written)."""
    notes = [p for p in text.split("\n\n") if p.startswith("**Kafka**")]
    notes += [line for line in text.splitlines() if line.startswith(("Kafka:", "**Kafka**:"))]
    return notes


def test_every_difference_is_a_kafka_note_under_its_rule_in_spec_md() -> None:
    """Catalogue -> prose: docs/spec.md names each id (a known difference, or a note no run
    can observe) in a **Kafka** note inside its rule's section."""
    sections = re.split(r"^### ", SPEC, flags=re.MULTILINE)
    entries = [(d.id, d.rule) for d in KNOWN_DIFFERENCES]
    entries += [(note.id, note.rule) for note in KAFKA_NOTES_NOT_OBSERVED]
    for ident, rule in entries:
        section = next(s for s in sections if s.startswith(f"{rule} "))
        assert any(f"`{ident}`" in note for note in _kafka_notes(section)), ident
    cited = set(re.findall(r"`(kafka-[a-z-]+)`", SPEC))
    assert cited == {ident for ident, _ in entries}, cited ^ {ident for ident, _ in entries}


def test_every_kafka_note_in_spec_md_has_an_id_in_the_catalogue() -> None:
    """Prose -> catalogue: each **Kafka** note opens with its id, which is a known
    difference (``--allow`` can accept it) or a note marked "not observable" and listed
    in ``KAFKA_NOTES_NOT_OBSERVED`` with the reason."""
    unobserved = {note.id for note in KAFKA_NOTES_NOT_OBSERVED}
    notes = _kafka_notes(SPEC)
    assert len(notes) >= len(IDS) + len(unobserved)
    for note in notes:
        match = re.match(r"\*\*Kafka\*\* \(`(kafka-[a-z-]+)`(, not observable)?\):", note)
        assert match is not None, f"a Kafka note without an id: {note[:100]!r}"
        ident, not_observable = match.group(1), match.group(2) is not None
        assert ident in (unobserved if not_observable else set(IDS)), ident


def test_the_catalogue_rejects_a_note_without_an_id() -> None:
    """The prose -> catalogue check fails on a note like the one R40 had."""
    note = "Kafka: has no abandon; `cancel()` on a watched operation removes only its entry."
    assert _kafka_notes("text\n" + note + "\n") == [note]
    assert re.match(r"\*\*Kafka\*\* \(`", note) is None


def test_observation_fields_are_the_observation_and_state_fields() -> None:
    """A field added to the observation or its state (say by a new step) must be named
    here too, so differences can mention it; the timer-only mask stays a subset."""
    names = {f.name for f in dataclasses.fields(Observation)} | {
        f"state.{f.name}" for f in dataclasses.fields(State)
    }
    assert names == OBSERVATION_FIELDS
    assert PURGATORY_STATE_FIELDS < OBSERVATION_FIELDS


def test_resolve_names_the_group_or_ids_and_refuses_unknown_ones() -> None:
    assert resolve(KAFKA) == KNOWN_DIFFERENCES
    assert resolve("kafka-resubmission, kafka-advance-result") == (
        known_difference("kafka-advance-result"),
        known_difference("kafka-resubmission"),
    )
    with pytest.raises(ValueError, match="unknown known difference 'kafka-nope'"):
        resolve("kafka-nope")
    with pytest.raises(KeyError, match="known:"):
        known_difference("R24")


# ---- the judge -----------------------------------------------------------------------------


def _observations(steps: list[Step], differences: str | None) -> list[Observation]:
    from tests.conformance.kafka_like import kafka_like
    from tests.support import load

    impl = load("reference") if differences is None else kafka_like(differences)
    return run_steps(impl, steps)


def test_a_difference_is_never_accepted_outside_its_circumstance() -> None:
    """R34's resubmission refused before any shutdown: allowing the after-shutdown
    difference (whose fields cover a watch) does not excuse it; allowing it does."""
    steps: list[Step] = [Init(), Watch("op", 5, ("k",)), Watch("op", 5, ("k",))]
    expected = _observations(steps, None)
    actual = _observations(steps, "kafka-resubmission")
    judge = Judge(resolve("kafka-after-shutdown,kafka-after-close"))
    verdicts = [judge.judge(s, e, a) for s, e, a in zip(steps, expected, actual, strict=True)]
    assert verdicts[2][0] is not None and verdicts[2][0].startswith('raised: expected "ValueError"')
    assert "not explained by the allowed differences" in verdicts[2][0]
    judge = Judge(resolve("kafka-resubmission"))
    verdicts = [judge.judge(s, e, a) for s, e, a in zip(steps, expected, actual, strict=True)]
    assert verdicts[2] == (None, ("kafka-resubmission",))


def test_later_fields_are_excused_only_after_the_difference_showed() -> None:
    """A watched count that differs with no duplicate key watched before is a failure."""
    steps: list[Step] = [Init(), Watch("op", 5, ("k",))]
    expected = _observations(steps, None)
    wrong = Observation.from_json(
        {**expected[1].to_json(), "state": {**expected[1].to_json()["state"], "watched": 2}}
    )
    judge = Judge(resolve("kafka-duplicate-keys"))
    judge.judge(steps[0], expected[0], expected[0])
    message, accepted = judge.judge(steps[1], expected[1], wrong)
    assert message is not None and "watched: expected 1, got 2" in message and accepted == ()


# ---- the Kafka-like adapter through the CLI -----------------------------------------------


@pytest.mark.parametrize("ident", sorted(SHOWN_BY_VECTORS))
def test_each_kafka_behaviour_passes_only_with_its_own_allow(
    ident: str, capsys: pytest.CaptureFixture[str]
) -> None:
    vectors = vectors_args(SHOWN_BY_VECTORS[ident])
    adapter = kafka_adapter(ident)
    code, out = conformance(capsys, "--adapter", adapter, *vectors)
    assert code == 1 and out.count("\nFAIL ") == len(SHOWN_BY_VECTORS[ident]), out
    others = ",".join(other for other in IDS if other != ident)
    code, out = conformance(capsys, "--adapter", adapter, "--allow", others, *vectors)
    assert code == 1, out
    code, out = conformance(capsys, "--adapter", adapter, "--allow", ident, *vectors)
    assert code == 0, out
    for name in SHOWN_BY_VECTORS[ident]:
        line = next(line for line in out.splitlines() if line.startswith(f"PASS {name} "))
        assert f"; accepted {ident} at step" in line
    summary = next(line for line in out.splitlines() if line.startswith(f"  {ident} ("))
    assert known_difference(ident).summary in summary and "never needed" not in summary


@pytest.mark.parametrize("ident", sorted(SHOWN_BY_SEQUENCES))
def test_kafka_behaviours_beyond_the_vectors_pass_replay_only_with_allow(
    ident: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    steps = tmp_path / "steps.jsonl"
    steps.write_text(
        "".join(json.dumps(step_to_json(step)) + "\n" for step in SHOWN_BY_SEQUENCES[ident]),
        encoding="utf-8",
    )
    adapter = kafka_adapter(ident)
    code, out = conformance(capsys, "--adapter", adapter, "--replay", str(steps))
    assert code == 1 and out.startswith("FAIL replay: step "), out
    others = ",".join(other for other in IDS if other != ident)
    code, out = conformance(capsys, "--adapter", adapter, "--replay", str(steps), "--allow", others)
    assert code == 1, out
    code, out = conformance(capsys, "--adapter", adapter, "--replay", str(steps), "--allow", ident)
    assert code == 0, out
    assert re.search(rf"    {ident} \(R\d+, .*\): \d+ steps?\n", out), out


def test_upstream_kafka_like_passes_every_vector_only_with_allow_kafka(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every behaviour at once, as an adapter over Kafka's own classes would show them."""
    adapter = kafka_adapter(KAFKA)
    code, out = conformance(capsys, "--adapter", adapter)
    assert code == 1
    failed = [line for line in out.splitlines() if line.startswith("FAIL ")]
    assert len(failed) >= 10
    code, out = conformance(capsys, "--adapter", adapter, "--allow", KAFKA)
    assert code == 0, out
    total = len(vector_paths([DEFAULT_VECTORS_DIR]))
    assert f"summary: {total} passed, 0 failed, 0 not consumed" in out
    assert "accepting known differences: " + ", ".join(IDS) in out
    for ident in SHOWN_BY_VECTORS:
        summary = next(line for line in out.splitlines() if line.startswith(f"  {ident} ("))
        assert "never needed" not in summary, summary


def test_the_stateful_search_accepts_an_allowed_difference_and_counts_it() -> None:
    """In process: the negative-timeout variant passes the search only with its --allow."""
    from tests.conformance.kafka_like import kafka_like
    from tests.support import load

    reference = load("reference")
    side = DriverSide(kafka_like("kafka-negative-timeout"))
    failure, stats = run_stateful(side, reference=reference, max_examples=60, seed=4)
    assert failure is not None
    failure, stats = run_stateful(
        side,
        reference=reference,
        max_examples=60,
        seed=4,
        allow=resolve("kafka-negative-timeout"),
    )
    assert failure is None
    assert stats.accepted.get("kafka-negative-timeout", 0) > 0


def test_the_reference_needs_no_known_difference(capsys: pytest.CaptureFixture[str]) -> None:
    adapter = shlex.join(
        [sys.executable, "-m", "kpurgatory.conformance.python_adapter", "--impl", "reference"]
    )
    code, out = conformance(capsys, "--adapter", adapter, "--allow", KAFKA)
    assert code == 0
    assert out.count("never needed") == len(IDS)


# ---- two differences on one step, consequences, and the stateful search under --allow -----


def test_two_differences_on_one_step_are_both_recorded() -> None:
    """A resubmission after a shutdown: the shutdown's difference explains the step alone,
    and the resubmission is recorded as well, so its later effects are accepted too."""
    steps: list[Step] = [Init(), Watch("op", 5, ("k",)), Shutdown(), Watch("op", 5, ("k",))]
    names = "kafka-after-shutdown,kafka-resubmission,kafka-after-close"
    expected = _observations(steps, None)
    actual = _observations(steps, names)
    judge = Judge(resolve(names))
    verdicts = [judge.judge(s, e, a) for s, e, a in zip(steps, expected, actual, strict=True)]
    assert verdicts[3][0] is None
    # the closed timer timing the watch is a third one (kafka-after-close)
    assert set(verdicts[3][1]) == set(names.split(","))
    assert judge.shown == set(names.split(","))


def test_an_always_difference_is_not_recorded_where_another_explains_the_step() -> None:
    """A watch after shutdown differs in the fields the stale current time could explain
    too; it is not recorded as shown (nothing says it showed), so it excuses nothing later."""
    steps: list[Step] = [Init(), Shutdown(), Watch("late", 5, ("k",))]
    expected = _observations(steps, None)
    actual = _observations(steps, "kafka-after-shutdown,kafka-after-close")
    judge = Judge(resolve(KAFKA))
    verdicts = [judge.judge(s, e, a) for s, e, a in zip(steps, expected, actual, strict=True)]
    assert verdicts[2][0] is None
    assert "kafka-stale-current-time" not in judge.shown


def test_the_search_draws_no_negative_time_when_kafkas_division_is_allowed() -> None:
    """Kafka crashes on a negative start time (a negative slot index): under
    kafka-truncating-division (so under --allow kafka) no run starts below zero; without
    it the search still draws negative readings."""
    from tests.support import load

    class Recording(DriverSide):
        def __init__(self, impl: ModuleType) -> None:
            super().__init__(impl)
            self.inits: list[Init] = []

        def execute(self, step: Step) -> Observation:
            if isinstance(step, Init):
                self.inits.append(step)
            return super().execute(step)

    reference = load("reference")
    for allow, negative in ((resolve(KAFKA), False), ((), True)):
        side = Recording(reference)
        failure, _ = run_stateful(
            side, reference=reference, max_examples=30, step_count=10, seed=5, allow=allow
        )
        assert failure is None
        drew_negative = any(i.clock_ms < 0 or i.start_ms < 0 for i in side.inits)
        assert drew_negative is negative, allow


@pytest.mark.parametrize("seed", [1])
def test_kafka_like_passes_the_search_only_with_allow_kafka(seed: int) -> None:
    """Quick tier: one seed of the battery below, 40 runs."""
    _kafka_like_search(seed, max_examples=40)


@pytest.mark.slow
@pytest.mark.parametrize("seed", list(range(1, 11)))
def test_kafka_like_passes_the_default_search_on_the_seed_battery(seed: int) -> None:
    """Every documented difference at once, through the default search (100 runs of 50
    steps): accepted on every seed with --allow kafka, and found without it (also with the
    timer steps alone)."""
    _kafka_like_search(seed, max_examples=100)
    _kafka_like_search(seed, max_examples=100, timer_only=True)


def _kafka_like_search(seed: int, *, max_examples: int, timer_only: bool = False) -> None:
    from tests.conformance.kafka_like import kafka_like
    from tests.support import load

    reference = load("reference")
    failure, stats = run_stateful(
        DriverSide(kafka_like(KAFKA)),
        reference=reference,
        max_examples=max_examples,
        seed=seed,
        allow=resolve(KAFKA),
        timer_only=timer_only,
    )
    assert failure is None, (failure.message, failure.json_lines())
    assert stats.accepted, "no difference was needed: the variant shows none"
    failure, _ = run_stateful(
        DriverSide(kafka_like(KAFKA)),
        reference=reference,
        max_examples=max_examples,
        seed=seed,
        timer_only=timer_only,
        shrink=False,
    )
    assert failure is not None
