#!/usr/bin/env node
// An example conformance adapter in JavaScript: a small timer port behind the kit's protocol.
//
// The port is a timer alone (no purgatory), like most published ports of Kafka's timing
// wheel, and it has no cancel and no next_due_time. Its adapter says so in its answer to
// every init ("capabilities"), so the kit never sends those steps, lists the vectors that
// need them as not consumed, and reports what was not checked. Run it with:
//
//   kpurgatory conformance --adapter "node conformance/examples/javascript/timer_adapter.mjs" \
//       --timer-only --stateful
//
// The protocol (docs/conformance.md): one JSON step per line on stdin, one JSON answer per
// line on stdout, in order, flushed. The port gets a manual clock (the adapter owns it and
// moves it: clock_advance, and advance_clock's timeout) and runs every task inline, inside
// advance_clock or add, as the contract asks (docs/porting.md).
//
// The timer keeps its scheduled tasks in one map (a wheel's buckets would be the real
// thing; the observable behaviour is the same, and this file is about the adapter).

import { createInterface } from "node:readline";

class ValueError extends Error {}
class RuntimeError extends Error {}

/** The exceptions of the port's contract, by the names the kit observes. */
function raisedName(error) {
  if (error instanceof ValueError) return "ValueError";
  if (error instanceof RuntimeError) return "RuntimeError";
  return null; // anything else is a crash, not an observation
}

/** ms rounded down to a multiple of tick (floor, also for negative readings: R1). */
function roundDown(ms, tick) {
  return ms - (((ms % tick) + tick) % tick);
}

class ManualClock {
  constructor(nowMs) {
    this.nowMs = nowMs;
  }
  advance(ms) {
    if (ms < 0) throw new ValueError(`ms must be >= 0, got ${ms}`);
    this.nowMs += ms;
  }
}

/** The port: schedule, drain in due order, current time moved before the hand-over. */
class Timer {
  constructor(tickMs, startMs, clock, runTask) {
    this.tickMs = tickMs;
    this.clock = clock;
    this.currentTime = roundDown(startMs, tickMs);
    this.pending = new Map(); // task -> its entry {task, due, seq}
    this.seq = 0;
    this.runTask = runTask;
    this.closed = false;
    this.refusing = false; // its executor was shut down: every hand-over is refused (R65)
  }
  handOver(task, due) {
    if (this.refusing) throw new RuntimeError(`the executor refused task ${task.label}`);
    this.runTask(task, due);
  }
  close() {
    this.closed = true; // idempotent; the tasks it holds never run (R14)
  }
  get size() {
    return this.pending.size;
  }
  add(task) {
    if (this.closed) throw new RuntimeError("the timer is closed");
    const due = roundDown(this.clock.nowMs + task.delayMs, this.tickMs);
    if (task.timer) task.timer.pending.delete(task); // a re-add moves the task (R10)
    task.timer = null;
    task.entry = null; // an earlier schedule waiting for its turn in a drain is void (R11)
    if (due <= this.currentTime) {
      this.handOver(task, due); // due at once: handed over inside add (R3)
      return;
    }
    const entry = { task, due, seq: this.seq++ };
    task.timer = this;
    task.entry = entry;
    this.pending.set(task, entry);
  }
  advanceClock(timeoutMs) {
    if (timeoutMs < 0) throw new ValueError(`timeout_ms must be >= 0, got ${timeoutMs}`);
    if (this.closed) return false; // at once, the clock does not move (R14)
    this.clock.advance(timeoutMs);
    const now = this.clock.nowMs;
    const due = [...this.pending.values()]
      .filter((entry) => entry.due <= now)
      .sort((a, b) => a.due - b.due || a.seq - b.seq);
    for (const entry of due) this.pending.delete(entry.task);
    this.currentTime = Math.max(this.currentTime, roundDown(now, this.tickMs)); // R2
    let handedOver = false;
    let refusal = null;
    for (const entry of due) {
      if (this.closed) break; // closed by a task of this drain: nothing more runs (R64)
      if (entry.task.entry !== entry || this.pending.has(entry.task)) continue; // R11
      entry.task.timer = null;
      entry.task.entry = null;
      try {
        this.handOver(entry.task, entry.due);
        handedOver = true;
      } catch (error) {
        if (!(error instanceof RuntimeError)) throw error;
        refusal ??= error; // the others are handed over first, then it is raised (R53)
      }
    }
    if (refusal !== null) throw refusal;
    return handedOver;
  }
}

const CAPABILITIES = { without: ["cancel", "next_due_time"] };

/** One run: the world an init creates, and the answers to its steps. */
class Run {
  constructor(init) {
    this.clock = new ManualClock(init.clock_ms ?? 0);
    this.timers = new Map();
    for (const label of init.timers ?? ["main"]) {
      this.timers.set(
        label,
        new Timer(init.tick_ms ?? 1, init.start_ms ?? 0, this.clock, (task, due) =>
          this.ran(task, due),
        ),
      );
    }
    this.tasks = new Map();
    this.events = [];
    this.unit = null;
  }

  ran(task, due) {
    const outer = this.unit === null;
    if (outer) this.unit = { label: task.label, due };
    this.events.push({
      kind: "task_ran",
      task: task.label,
      at_ms: this.clock.nowMs,
      unit: this.unit.label,
      due_ms: this.unit.due,
    });
    try {
      for (const inner of task.onRun) {
        try {
          this.call(inner);
        } catch (error) {
          if (raisedName(error)) break; // a step that raised ends the task's run
          throw error;
        }
      }
    } finally {
      if (outer) this.unit = null;
    }
  }

  timer(label) {
    const timer = this.timers.get(label ?? "main");
    if (!timer) throw new Error(`unknown timer label ${JSON.stringify(label)}`);
    return timer;
  }

  call(step) {
    switch (step.step) {
      case "add": {
        let task = this.tasks.get(step.task);
        if (!task) {
          task = { label: step.task, delayMs: step.delay_ms, onRun: step.on_run ?? [] };
          this.tasks.set(step.task, task);
        }
        this.timer(step.timer).add(task);
        return null;
      }
      case "advance":
        return this.timer(step.timer).advanceClock(step.ms);
      case "clock_advance":
        this.clock.advance(step.ms);
        return null;
      case "close":
        this.timer(step.timer).close();
        return null;
      case "executor_shutdown":
        this.timer(step.timer).refusing = true;
        return null;
      default:
        throw new Error(`unsupported step kind ${step.step}`);
    }
  }

  answer(step) {
    this.events = [];
    let result = null;
    let raised = null;
    try {
      result = this.call(step);
    } catch (error) {
      raised = raisedName(error);
      if (raised === null) throw error;
    }
    return {
      result,
      raised,
      events: this.events,
      tries: {},
      state: {
        clock_ms: this.clock.nowMs,
        timer_sizes: Object.fromEntries([...this.timers].map(([label, t]) => [label, t.size])),
      },
    };
  }
}

let run = null;
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  let answer;
  try {
    const step = JSON.parse(line);
    if (step.step === "init") {
      run = new Run(step);
      answer = {
        result: null,
        raised: null,
        events: [],
        tries: {},
        state: run.answer({ step: "clock_advance", ms: 0 }).state,
        capabilities: CAPABILITIES,
      };
    } else if (run === null) {
      answer = { error: "the first step of a run must be init" };
    } else {
      answer = run.answer(step);
    }
  } catch (error) {
    answer = { error: String(error.message ?? error) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
