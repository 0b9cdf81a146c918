"""The porting documents agree with the rule index, the spec and the code.

Who owes each rule is kept once, in ``kpurgatory.spec.rules`` (``Rule.owed_by``):

- docs/porting.md's "What a port owes" table is generated from it
  (``python -m tests.docs.owed_rules --write``) and must be up to date;
- its checklist names every rule a port owes (every port, or a port that offers a
  feature) and no rule about Python alone (R61, R63-R69 and R73 were missing once), and
  its section 6 names every rule of a port on an event loop;
- no page names a rule that does not exist, and a range from R1 on (a claim about every
  rule: "R1 to R62" once stood where the spec had more) ends at the last rule, except
  the few sub-ranges listed here with what they are.

The contradictions once found between these pages and the spec are checked where a
check can be written: porting.md's walk-through of R22 is the spec's own pseudocode,
whose steps are in the reference's order; no page says ``shutdown`` joins the reaper
(R39); vectors.md's ``via`` is the call's name, not the step's kind, and ``cancel`` on an
operation whose ``watch`` raised changes nothing; conformance.md's sample report is the
report the kit prints now for the port it describes.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
from pathlib import Path
from typing import get_args

import pytest

from kpurgatory import reference
from kpurgatory.cli import main
from kpurgatory.conformance.driver import Observation, run_steps
from kpurgatory.spec.events import CompletionVia
from kpurgatory.spec.rules import EVERY_PORT, FEATURES, PYTHON_ONLY, RULES
from kpurgatory.steps import step_from_json
from tests.docs.owed_rules import current, table

ROOT = Path(__file__).resolve().parents[2]

from_checkout = pytest.mark.skipif(
    not (ROOT / "kpurgatory" / "reference" / "purgatory.py").is_file(),
    reason="reads the package source and checkout paths (not in the compiled job's tree)",
)
DOCS = ROOT / "docs"
PAGES = [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]
PORTING = DOCS / "porting.md"
SPEC = DOCS / "spec.md"
LAST = RULES[-1].id

RULE_ID = re.compile(r"\bR(\d+)\b")
RANGE = re.compile(r"\bR(\d+)\s*(?:-|\u2013|\.\.|to|through)\s*R(\d+)\b")
SUB_RANGES_FROM_R1 = {
    ("R1", "R3"): "the first timer rules, in a list of rule groups (verification.md)",
    ("R1", "R12"): "the timer rules a list model or the timer-only vectors observe",
}
"""Ranges from R1 that are not claims about every rule, with what they are."""


def ids(text: str) -> set[str]:
    """The rule ids ``text`` names, ranges (``R45-R51``, ``R1 to R12``) expanded."""
    named = {f"R{int(n)}" for n in RULE_ID.findall(text)}
    for low, high in RANGE.findall(text):
        named |= {f"R{n}" for n in range(int(low), int(high) + 1)}
    return named


def section(text: str, heading: str) -> str:
    """The body of the section whose heading line starts with ``heading``, up to the next
    heading of the same or a higher level."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    level = len(heading) - len(heading.lstrip("#"))
    end, in_fence = len(lines), False
    for i in range(start + 1, len(lines)):
        if lines[i].startswith("```"):
            in_fence = not in_fence
        elif not in_fence and re.match(rf"#{{1,{level}}} ", lines[i]):
            end = i
            break
    return "\n".join(lines[start + 1 : end])


def fenced(text: str, language: str) -> list[str]:
    """The bodies of the fenced blocks of ``language`` in ``text``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def owed() -> set[str]:
    """The rules some port owes: every port, or a port that offers a feature."""
    return {r.id for r in RULES if r.owed_by != PYTHON_ONLY}


def python_only() -> set[str]:
    return {r.id for r in RULES if r.owed_by == PYTHON_ONLY}


# ---- the index: every rule decided once ------------------------------------------------


def test_every_rule_says_who_owes_it() -> None:
    """Each rule is owed by every port, by a port with a named feature, or by none (Python
    only, with the reason); a new rule left undecided fails here."""
    undecided = [r.id for r in RULES if r.owed_by not in {EVERY_PORT, PYTHON_ONLY, *FEATURES}]
    assert not undecided, f"mark who owes these in kpurgatory/spec/rules.py: {undecided}"
    assert not [r.id for r in RULES if (r.owed_by == PYTHON_ONLY) != bool(r.why)], (
        "a Python-only rule says why, and only a Python-only rule has a why"
    )
    used = {r.owed_by for r in RULES} - {EVERY_PORT, PYTHON_ONLY}
    assert used == set(FEATURES), "every feature marks some rule"


def test_porting_md_owed_table_is_generated_from_the_index() -> None:
    """docs/porting.md carries the table ``tests/docs/owed_rules.py`` makes from the index."""
    assert current(PORTING.read_text(encoding="utf-8")) == table(), (
        "docs/porting.md's owed-rules table is stale: run python -m tests.docs.owed_rules --write"
    )


def test_the_owed_table_lists_every_rule_once_in_order() -> None:
    rows = re.findall(r"^\| \[(R\d+)\]", table(), re.MULTILINE)
    assert rows == [r.id for r in RULES]


# ---- ranges and ids on every page ------------------------------------------------------


def range_problems(text: str, page: str) -> list[str]:
    """Rule ids ``text`` names that do not exist, and ranges from R1 that do not end at
    the last rule (unless listed in ``SUB_RANGES_FROM_R1``)."""
    known = {r.id for r in RULES}
    found = [f"{page}: names {rid}, which is no rule" for rid in sorted(ids(text) - known)]
    for low, high in RANGE.findall(text):
        first, last = f"R{int(low)}", f"R{int(high)}"
        if int(low) >= int(high):
            found.append(f"{page}: {first}-{last} is not a range")
        elif first == "R1" and last != LAST and (first, last) not in SUB_RANGES_FROM_R1:
            found.append(f"{page}: names the rules as R1-{last}; the spec has R1 to {LAST}")
    return found


def test_pages_name_only_existing_rules_and_the_whole_range() -> None:
    """No page names a rule that does not exist, and every "R1 to Rn" names all rules."""
    problems = [
        problem
        for page in PAGES
        for problem in range_problems(page.read_text(encoding="utf-8"), page.name)
    ]
    assert problems == []


def test_the_range_check_reports_a_stale_range_and_an_unknown_rule() -> None:
    """The check can fail: a stale whole range, an unknown id and a reversed range."""
    beyond = f"R{len(RULES) + 1}"
    text = f"rules R1 to R62; also R1..R70, R1-{LAST}, R1-R12, R52-R56, {beyond} and R9-R3."
    assert range_problems(text, "p.md") == [
        f"p.md: names {beyond}, which is no rule",
        f"p.md: names the rules as R1-R62; the spec has R1 to {LAST}",
        f"p.md: names the rules as R1-R70; the spec has R1 to {LAST}",
        "p.md: R9-R3 is not a range",
    ]


# ---- porting.md's checklist and section 6 ----------------------------------------------


def checklist_problems(text: str) -> list[str]:
    """What the ``## Checklist`` of a porting guide leaves out or should not have."""
    named = ids(section(text, "## Checklist"))
    found = [f"the checklist leaves out {rid}" for rid in sorted(owed() - named, key=_number)]
    found += [
        f"the checklist names {rid}, which no port owes"
        for rid in sorted(named & python_only(), key=_number)
    ]
    return found


def _number(rule_id: str) -> int:
    return int(rule_id.removeprefix("R"))


def test_the_checklist_names_every_rule_a_port_owes() -> None:
    """Every rule owed by every port or by a port with a feature is in the checklist;
    no rule about Python alone is."""
    assert checklist_problems(PORTING.read_text(encoding="utf-8")) == []


def test_the_checklist_check_reports_a_missing_and_a_python_only_rule() -> None:
    """Without R61 (as the checklist once was) the check names R61; a Python-only rule
    in the checklist is named too."""
    text = PORTING.read_text(encoding="utf-8")
    checklist = section(text, "## Checklist")
    without = text.replace(checklist, checklist.replace("(R61)", "(R30)"))
    assert checklist_problems(without) == ["the checklist leaves out R61"]
    extra = text.replace(checklist, checklist + "\n- [ ] Defaults (R15).\n")
    assert checklist_problems(extra) == ["the checklist names R15, which no port owes"]


def test_the_event_loop_section_names_every_rule_of_a_loop_port() -> None:
    """Section 6 of the porting guide names every rule owed by a port on an event loop,
    and the bounded drain (R73) that bounding the drain takes."""
    body = section(PORTING.read_text(encoding="utf-8"), "## 6. ")
    loop = {r.id for r in RULES if r.owed_by in {"event-loop", "bounded-drain"}}
    assert loop - ids(body) == set()
    assert ids(body) & python_only() == set()


# ---- R22: the walk-through is the spec's pseudocode, in the reference's order ----------


def test_porting_md_r22_walk_through_is_the_spec_pseudocode() -> None:
    """porting.md's R22 section shows the spec's R22 pseudocode unchanged (it once said to
    release the lock before the timer add, against R22 and R63)."""
    spec = fenced(section(SPEC.read_text(encoding="utf-8"), "### R22 "), "text")
    guide = fenced(section(PORTING.read_text(encoding="utf-8"), "### The try-complete"), "text")
    assert len(spec) == 1 and guide == spec


STEPS_IN_ORDER = (
    ("if operation.abandoned", "operation._state & ABANDONED"),  # R40
    ("pending flag := false", "operation._clear_pending("),  # R41
    ("unfinished += 1", "self._unfinished += 1"),  # R61
    ("append operation to watchers", "self._watch_key("),  # R24
    ("estimate += 1", "self._estimated_total_operations += 1"),  # R30
    ("not operation.untimed", "operation._untimed"),  # R66
    ("timer.add(operation)", "self._timer.add("),  # R3
    ("shut down: raise", "self._refuse_if_shut_down("),  # R64
)
"""Each step of R22's pseudocode, and the name the reference's submission uses for it."""


def reference_submission() -> str:
    """The source of the submission both purgatories run (the protocol's ``_submit``,
    which the reference's reader reads first), with ``_watch`` and ``_time`` (its watch
    and timer steps) in place of their calls."""
    source = (ROOT / "kpurgatory" / "protocol.py").read_text(encoding="utf-8")
    functions = {
        node.name: ast.get_source_segment(source, node) or ""
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef)
    }
    submit = functions["_submit"]
    for step in ("_watch", "_time"):  # the steps whose code R22's pseudocode spells out
        assert submit.count(f"self.{step}(") == 1
        submit = submit.replace(f"self.{step}(", functions[step] + "\n(")
    return submit


def order(text: str, markers: list[str]) -> list[int]:
    return [text.index(marker) for marker in markers]


@from_checkout
def test_r22_pseudocode_steps_are_in_the_reference_order() -> None:
    """The spec's R22 pseudocode has the abandoned check (R40), the pending flag (R41),
    the unfinished count (R61), the watches, the estimate, the untimed mark (R66), the
    timer add and the shutdown refusal (R64), in the order the reference takes them."""
    (pseudocode,) = fenced(section(SPEC.read_text(encoding="utf-8"), "### R22 "), "text")
    in_spec = order(pseudocode, [spec for spec, _ in STEPS_IN_ORDER])
    in_reference = order(reference_submission(), [name for _, name in STEPS_IN_ORDER])
    assert in_spec == sorted(in_spec), "the pseudocode's steps are out of order"
    assert in_reference == sorted(in_reference), "the reference takes the steps in this order"
    lock = pseudocode.index("holding operation.lock:")
    released = pseudocode.index("# lock released")
    assert lock < min(in_spec) and max(in_spec) < released, "every step holds the lock"


# ---- R39: no page says shutdown waits for the reaper -----------------------------------

SHUTDOWN = re.compile(r"\bshut(?:s|ting)? ?down\b|`shutdown`|shutdown\(\)", re.IGNORECASE)
JOINS = re.compile(r"\bjoin(?:s|ing)\b(?![ _-]?group)|\b(?:and|then|to) join\b")


def joins_the_reaper(text: str) -> list[str]:
    """The paragraphs of ``text`` that speak of shutting down, of the reaper and of
    joining (what porting.md, the tutorial and its example said of ``shutdown``)."""
    paragraphs = [re.sub(r"\s+", " ", p) for p in re.split(r"\n\s*\n", text)]
    return [p for p in paragraphs if SHUTDOWN.search(p) and "reaper" in p and JOINS.search(p)]


def test_no_page_says_shutdown_joins_the_reaper() -> None:
    """R39: ``shutdown`` does not wait for the reaper or a running task;
    ``await_termination`` does. porting.md, the tutorial and its example once said
    "stops and joins the reaper"."""
    sources = [*PAGES, ROOT / "examples" / "long_poll_server.py"]
    said = {p.name: joins_the_reaper(p.read_text(encoding="utf-8")) for p in sources}
    assert {name: found for name, found in said.items() if found} == {}
    assert joins_the_reaper(
        "- The reaper thread loops `advance_clock(200)` (R31). `shutdown` stops and joins\n"
        "  it, then closes the timer; pending operations are neither completed nor expired."
    )
    assert joins_the_reaper("self.fetches.shutdown()  # stops and joins the reaper.")


# ---- vectors.md: via and cancel ---------------------------------------------------------


def run(*steps: dict[str, object]) -> list[Observation]:
    return run_steps(reference, [step_from_json(step) for step in steps])


def test_via_is_the_name_of_the_call_not_the_kind_of_the_step() -> None:
    """A ``watch`` step that completes its operation records ``via``
    ``try_complete_else_watch``; vectors.md's ``via`` item names exactly the values of
    ``CompletionVia`` and says which step makes ``try_complete_else_watch``."""
    observations = run(
        {"step": "init"},
        {"step": "watch", "operation": "o", "delay_ms": 5, "keys": ["k"], "ready": True},
    )
    (event,) = observations[1].events
    assert event.to_json()["kind"] == "completed"
    assert event.to_json()["via"] == "try_complete_else_watch"
    text = (DOCS / "vectors.md").read_text(encoding="utf-8")
    item = next(p for p in re.split(r"\n(?=- )", text) if p.startswith("- `via`"))
    named = set(re.findall(r"`(\w+)`", item))
    assert set(get_args(CompletionVia)) <= named
    assert "`try_complete_else_watch` (the call a `watch` step makes)" in re.sub(r"\s+", " ", item)


def test_cancel_of_an_operation_whose_watch_raised_changes_nothing() -> None:
    """vectors.md: ``cancel`` on an operation that no ``watch`` submitted (its ``watch``
    raised) is the plain task cancel and changes nothing; on a submitted one it
    abandons (vectors.md once said every operation of a run was submitted)."""
    watch_o = {"step": "watch", "operation": "o", "delay_ms": 5, "keys": ["k"]}
    observations = run(
        {"step": "init"},
        {"step": "watch", "operation": "never", "delay_ms": 5, "keys": []},
        watch_o,
        watch_o,  # raises (R34), but the first watch submitted "o"
        {"step": "cancel", "task": "never"},
        {"step": "cancel", "task": "o"},
    )
    _, raised, watched, raised_again, cancelled_never, cancelled_o = observations
    assert (raised.raised, raised_again.raised) == ("ValueError", "ValueError")
    assert cancelled_never.state == watched.state and not cancelled_never.events
    assert cancelled_o.state is not None
    assert (cancelled_o.state.watched, cancelled_o.state.num_delayed) == (0, 0)


# ---- conformance.md: the sample report is the kit's report -----------------------------


def sample_report() -> list[str]:
    """The lines of conformance.md's sample report of a port whose timer is a tick late."""
    text = (DOCS / "conformance.md").read_text(encoding="utf-8")
    intro = text.index("For a port whose timer fires")
    (block, *_) = fenced(text[intro:], "text")
    return block.splitlines()


def follows(sample: list[str], report: list[str]) -> str | None:
    """None if ``sample`` is ``report`` shortened: its lines appear in order, ``...``
    stands for any lines, and a line ending in ``...`` for any line it begins; else the
    first sample line that is not there."""
    position = 0
    for line in sample:
        if line == "...":
            continue
        prefix = line.removesuffix("...")
        while position < len(report) and not (
            report[position] == line
            or (line.endswith("...") and report[position].startswith(prefix))
        ):
            position += 1
        if position == len(report):
            return line
        position += 1
    return None


@from_checkout
def test_the_sample_report_is_what_the_kit_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """conformance.md's sample report (a timer a tick late: ``broken_adapter.py --bug
    late``) is the kit's report shortened: the vector count, the failure shown and the
    summary are today's (it once said 15 vectors)."""
    adapter = shlex.join(
        [sys.executable, str(ROOT / "tests" / "conformance" / "broken_adapter.py"), "--bug", "late"]
    )
    code = main(["conformance", "--adapter", adapter])
    out = capsys.readouterr().out
    assert code == 1
    shown = "./my-port-adapter"
    out = out.replace(f"through adapter '{adapter}'", f"through adapter '{shown}'")
    out = out.replace(shlex.quote(adapter), shown).replace(f"{ROOT}/", "")
    sample = sample_report()
    assert sample[0].startswith("conformance: ") and sample[-1].startswith("  step kinds")
    missing = follows(sample, out.splitlines())
    assert missing is None, (
        f"docs/conformance.md's sample report has {missing!r}, which the kit no longer prints "
        "there: run kpurgatory conformance --adapter "
        "'python tests/conformance/broken_adapter.py --bug late' and update the sample"
    )


def test_follows_finds_a_stale_line() -> None:
    report = ["conformance: 52 vectors", "FAIL a", "  detail 1", "summary: 1 (of 52)"]
    assert follows(["conformance: 52 vectors", "...", "summary: 1 (of 52)"], report) is None
    assert follows(["FAIL a", "  detail..."], report) is None
    assert follows(["conformance: 15 vectors", "..."], report) == "conformance: 15 vectors"
