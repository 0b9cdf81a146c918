#!/usr/bin/env node
// The conformance adapter of the Kafka-like JavaScript port (kafka_port.mjs): the kit's
// protocol (docs/conformance.md) over it, one JSON step per line in, one answer out.
//
//   kpurgatory conformance --adapter "node tests/conformance/ports/kafka_port/adapter.mjs" \
//       --stateful --allow kafka
//
// The adapter owns a manual clock, runs every task inline (inside the drain or the add
// that hands it over) and performs a task's on_run steps when it runs. The port has no
// next due time, as Kafka has none: the answer to init declares it.
//
// `--timer-only` serves the timer steps alone (the purgatory's are refused).
// `--negative-time` stops declaring negative_time absent: a negative current time gives
// a negative bucket index here as in Kafka (a crash), but not on every run. `--bug NAME`
// plants a bug a porter could write, for the tests that check the kit still catches it
// with `--allow kafka`: `late-tick` (the drain polls at the reading before the clock's,
// so a bucket is handed over a tick late), `flush-first-only` (a flush hands over only
// its bucket's first entry), `cancel-keeps-entry` (a cancel forgets the task's entry but
// leaves it linked in its bucket, still counted), `miscount-purge` (the purge does not
// reset the estimate).

import { createInterface } from "node:readline";

import {
  DelayedOperation,
  DelayedOperationPurgatory,
  IllegalArgument,
  IllegalState,
  Rejected,
  SystemTimer,
  TimerTask,
} from "./kafka_port.mjs";

const args = process.argv.slice(2);
const timerOnly = args.includes("--timer-only");
const negativeTime = args.includes("--negative-time");
const bugAt = args.indexOf("--bug");
const bug = bugAt >= 0 ? args[bugAt + 1] : null;
const BUGS = ["late-tick", "flush-first-only", "cancel-keeps-entry", "miscount-purge"];
if (bug !== null && !BUGS.includes(bug)) {
  process.stderr.write(`adapter.mjs: unknown bug ${bug} (${BUGS.join(", ")})\n`);
  process.exit(2);
}

/** A step that does not fit the run: answered {"error": ...}, not an observation. */
class StepFault extends Error {}

class ValueError extends Error {}

/** The kit's name for an exception of the port's contract; null for a crash. */
function observed(error) {
  if (error instanceof IllegalArgument || error instanceof ValueError) return "ValueError";
  if (error instanceof IllegalState || error instanceof Rejected) return "RuntimeError";
  return null;
}

function floorDiv(a, b) {
  return Math.floor(a / b);
}

function integer(step, name, otherwise) {
  const value = name in step ? step[name] : otherwise;
  if (!Number.isSafeInteger(value)) throw new StepFault(`${name} must be an integer, got ${JSON.stringify(value)}`);
  return value;
}

function text(step, name, otherwise) {
  const value = name in step ? step[name] : otherwise;
  if (typeof value !== "string") throw new StepFault(`${name} must be a string, got ${JSON.stringify(value)}`);
  return value;
}

/** Runs each task inside the call that submits it; refuses after shutdown (Kafka's pool). */
class InlineExecutor {
  constructor() {
    this.down = false;
  }
  submit(task) {
    if (this.down) throw new Rejected("the executor is shut down");
    try {
      task.run();
    } catch (error) {
      if (error instanceof StepFault) throw error;
      // a task's failure stays in its Future, as Kafka's executor keeps it
    }
  }
  shutdown() {
    this.down = true;
  }
}

/** One run: the world an init builds and the answers to its steps. */
class Run {
  constructor(init) {
    this.tickMs = integer(init, "tick_ms", 1);
    const wheelSize = integer(init, "wheel_size", 20);
    const startMs = integer(init, "start_ms", 0);
    this.nowMs = integer(init, "clock_ms", 0);
    const labels = "timers" in init ? init.timers : ["main"];
    if (!Array.isArray(labels) || labels.length === 0) throw new StepFault("timers must be a non-empty list");
    this.timers = new Map();
    for (const label of labels) {
      const timer = new SystemTimer(this.tickMs, wheelSize, startMs, () => this.nowMs, new InlineExecutor());
      plant(timer);
      this.timers.set(label, timer);
    }
    this.tasks = new Map();
    this.operations = new Map();
    this.events = [];
    this.tries = new Map();
    this.unit = null;
    this.unitDue = null;
    this.via = ["force_complete"];
    if (!timerOnly) {
      const first = this.timers.values().next().value;
      const purgeInterval = integer(init, "purge_interval", 1000);
      const timerEnabled = "timer_enabled" in init ? init.timer_enabled : true;
      this.purgatory = new DelayedOperationPurgatory(first, purgeInterval, timerEnabled);
      if (bug === "miscount-purge") {
        const advance = this.purgatory.advanceClock.bind(this.purgatory);
        this.purgatory.advanceClock = () => {
          const estimate = this.purgatory.estimatedTotalOperations;
          advance();
          if (this.purgatory.estimatedTotalOperations !== estimate) this.purgatory.estimatedTotalOperations = estimate;
        };
      }
    } else {
      this.purgatory = null;
    }
  }

  timer(step) {
    const label = text(step, "timer", "main");
    const timer = this.timers.get(label);
    if (timer === undefined) throw new StepFault(`unknown timer label ${label}`);
    return timer;
  }

  dueMs(delayMs) {
    return floorDiv(this.nowMs + delayMs, this.tickMs) * this.tickMs;
  }

  record(kind, field, label) {
    const event = { kind, [field]: label, at_ms: this.nowMs };
    if (kind === "completed") event.via = this.via[this.via.length - 1];
    event.unit = this.unit;
    event.due_ms = this.unitDue;
    this.events.push(event);
  }

  /** Runs body within the hand-over of label (due at dueMs), unless one is running. */
  within(label, dueMs, body) {
    const entered = this.unit === null;
    if (entered) {
      this.unit = label;
      this.unitDue = dueMs;
    }
    try {
      body();
    } finally {
      if (entered) this.unit = this.unitDue = null;
    }
  }

  /** Calls that can complete an operation, with the kind of call pushed as its via. */
  completing(via, body) {
    this.via.push(via);
    try {
      return body();
    } finally {
      this.via.pop();
    }
  }

  answer(step) {
    this.events = [];
    this.tries = new Map();
    this.nestedFault = null;
    let result = null;
    let raised = null;
    try {
      result = this.call(step);
    } catch (error) {
      if (error instanceof StepFault) throw error;
      raised = observed(error);
      if (raised === null) throw error;
    }
    if (this.nestedFault !== null) throw this.nestedFault;
    return this.observation(result, raised);
  }

  /** A task's on_run steps: the first that raises ends the run (it is one call of user code). */
  perform(task, onRun) {
    for (const inner of onRun) {
      try {
        this.call(inner);
      } catch (error) {
        if (error instanceof StepFault) {
          if (this.nestedFault === null) this.nestedFault = new StepFault(`in the run of task ${task}: ${error.message}`);
        }
        return;
      }
    }
  }

  call(step) {
    const kind = text(step, "step", "");
    switch (kind) {
      case "add": {
        const label = text(step, "task", "");
        if (this.operations.has(label)) throw new StepFault(`add names an operation: ${label}`);
        const delayMs = integer(step, "delay_ms", 0);
        const onRun = "on_run" in step ? step.on_run : [];
        if (!Array.isArray(onRun)) throw new StepFault("on_run must be a list of steps");
        let task = this.tasks.get(label);
        if (task === undefined) {
          task = new AdapterTask(this, label, delayMs, onRun);
          this.tasks.set(label, task);
        } else if (task.delayMs !== delayMs || JSON.stringify(task.onRun) !== JSON.stringify(onRun)) {
          throw new StepFault("a re-add must repeat delay_ms and on_run");
        }
        const timer = this.timer(step);
        const previous = task.dueMs;
        task.dueMs = this.dueMs(delayMs);
        try {
          timer.add(task);
        } catch (error) {
          task.dueMs = previous;
          throw error;
        }
        return null;
      }
      case "cancel": {
        const label = text(step, "task", "");
        const target = this.tasks.get(label) ?? this.operations.get(label);
        if (target === undefined) throw new StepFault(`unknown task or operation ${label}`);
        target.cancel();
        return null;
      }
      case "advance": {
        const ms = integer(step, "ms", 0);
        const timer = this.timer(step);
        if (ms >= 0) this.nowMs += ms; // a negative timeout polls at once, as Kafka's does
        return timer.advanceClock();
      }
      case "clock_advance": {
        const ms = integer(step, "ms", 0);
        if (ms < 0) throw new ValueError(`ms must be >= 0, got ${ms}`);
        this.nowMs += ms;
        return null;
      }
      default:
        if (this.purgatory === null) throw new StepFault(`unsupported step kind ${kind}`);
        return this.purgatoryCall(kind, step);
    }
  }

  purgatoryCall(kind, step) {
    const purgatory = this.purgatory;
    switch (kind) {
      case "watch": {
        const label = text(step, "operation", "");
        if (this.tasks.has(label)) throw new StepFault(`watch names a task: ${label}`);
        const delayMs = integer(step, "delay_ms", 0);
        const keys = step.keys;
        if (!Array.isArray(keys)) throw new StepFault("keys must be a list");
        for (const key of keys) {
          if (typeof key !== "string" && !Number.isSafeInteger(key)) throw new StepFault("a key is a string or an integer");
        }
        const ready = "ready" in step ? step.ready : false;
        const readyOnTry = "ready_on_try" in step ? step.ready_on_try : null;
        let operation = this.operations.get(label);
        const fields = JSON.stringify([delayMs, keys, ready, readyOnTry]);
        if (operation === undefined) {
          operation = new FlagOperation(this, label, delayMs, ready, readyOnTry, fields);
          this.operations.set(label, operation);
        } else if (operation.fields !== fields) {
          throw new StepFault("a repeated watch must repeat every field of the first");
        }
        const previous = operation.dueMs;
        operation.dueMs = this.dueMs(delayMs);
        try {
          return this.completing("try_complete_else_watch", () => purgatory.tryCompleteElseWatch(operation, keys));
        } catch (error) {
          operation.dueMs = previous;
          throw error;
        }
      }
      case "set_ready":
        this.existing(step).ready = "ready" in step ? step.ready : true;
        return null;
      case "check_and_complete":
        return this.completing("check_and_complete", () => purgatory.checkAndComplete(step.key));
      case "force_complete": {
        const operation = this.existing(step);
        return this.completing("force_complete", () => operation.forceComplete());
      }
      case "cancel_for_key":
        return purgatory.cancelForKey(step.key).map((operation) => operation.label);
      case "purgatory_advance": {
        const ms = integer(step, "ms", 0);
        if (ms >= 0) this.nowMs += ms;
        purgatory.advanceClock();
        return null;
      }
      case "shutdown":
        purgatory.shutdown();
        return null;
      default:
        throw new StepFault(`unsupported step kind ${kind}`);
    }
  }

  existing(step) {
    const label = text(step, "operation", "");
    const operation = this.operations.get(label);
    if (operation === undefined) throw new StepFault(`unknown operation ${label}`);
    return operation;
  }

  observation(result, raised) {
    const sizes = {};
    for (const [label, timer] of this.timers) sizes[label] = timer.size;
    const state = { clock_ms: this.nowMs, timer_sizes: sizes };
    if (this.purgatory !== null) {
      state.watched = this.purgatory.watched;
      state.num_delayed = this.purgatory.numDelayed;
      state.watched_keys = this.purgatory.watchersByKey.size;
      state.num_purged = this.purgatory.numPurged;
      state.estimated_total_operations = this.purgatory.estimatedTotalOperations;
    }
    return { result, raised, events: this.events, tries: Object.fromEntries(this.tries), state };
  }
}

/** A task of the kit: records task_ran in the current hand-over, then performs on_run. */
class AdapterTask extends TimerTask {
  constructor(run, label, delayMs, onRun) {
    super(delayMs);
    this.runOf = run;
    this.label = label;
    this.onRun = onRun;
    this.dueMs = null;
  }
  run() {
    this.runOf.within(this.label, this.dueMs, () => {
      this.runOf.record("task_ran", "task", this.label);
      this.runOf.perform(this.label, this.onRun);
    });
  }
}

/** The kit's flag operation (docs/vectors.md, "Operations"). */
class FlagOperation extends DelayedOperation {
  constructor(run, label, delayMs, ready, readyOnTry, fields) {
    super(delayMs);
    this.runOf = run;
    this.label = label;
    this.ready = ready;
    this.readyOnTry = readyOnTry;
    this.fields = fields;
    this.count = 0;
    this.dueMs = null;
  }
  tryComplete() {
    this.count += 1;
    this.runOf.tries.set(this.label, (this.runOf.tries.get(this.label) ?? 0) + 1);
    if (this.readyOnTry !== null && this.count === this.readyOnTry) this.ready = true;
    return this.ready && this.forceComplete();
  }
  run() {
    this.runOf.within(this.label, this.dueMs, () => this.runOf.completing("expiry", () => super.run()));
  }
  onComplete() {
    this.runOf.record("completed", "operation", this.label);
  }
  onExpiration() {
    this.runOf.record("expired", "operation", this.label);
  }
}

/** Plants the --bug in one timer (the honest port has none). */
function plant(timer) {
  if (bug === "late-tick") {
    const now = timer.nowMs;
    timer.nowMs = () => now() - 1;
    const add = timer.add.bind(timer);
    timer.add = (task) => {
      timer.nowMs = now;
      try {
        add(task);
      } finally {
        timer.nowMs = () => now() - 1;
      }
    };
  } else if (bug === "cancel-keeps-entry") {
    TimerTask.prototype.cancel = function cancel() {
      this.entry = null;
    };
  } else if (bug === "flush-first-only") {
    const addEntry = timer.addEntry.bind(timer);
    let flushing = null;
    timer.addEntry = (entry) => {
      if (flushing !== null) {
        if (flushing.done) return;
        flushing.done = true;
      }
      addEntry(entry);
    };
    const advance = timer.advanceClock.bind(timer);
    timer.advanceClock = () => {
      const poll = timer.queue.poll.bind(timer.queue);
      timer.queue.poll = (nowMs) => {
        flushing = { done: false };
        return poll(nowMs);
      };
      try {
        return advance();
      } finally {
        timer.queue.poll = poll;
        flushing = null;
      }
    };
  }
}

let run = null;
const out = (answer) => process.stdout.write(JSON.stringify(answer) + "\n");
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (line.trim() === "") continue;
  try {
    const step = JSON.parse(line);
    if (step === null || typeof step !== "object" || Array.isArray(step)) throw new StepFault("a step is a JSON object");
    if (step.step === "init") {
      run = new Run(step);
      const answer = run.observation(null, null);
      // Kafka's wheel takes no negative clock reading (a negative bucket index), nor this
      // port; --negative-time sends them anyway (runs whose slots stay >= 0 do work).
      // nested_advance: run inline, a task's drain inside a flush can move the wheel past
      // the flushed bucket's slot, and the flush then re-adds to that bucket for ever, as
      // Kafka's classes run inline do (docs/spec.md, R74's Kafka note)
      const without = ["next_due_time", "close", "executor_shutdown", "callbacks", "nested_advance"];
      if (!negativeTime) without.push("negative_time");
      answer.capabilities = { without, async_run: false };
      out(answer);
    } else if (run === null) {
      out({ error: "the first step of a run must be init" });
    } else {
      out(run.answer(step));
    }
  } catch (error) {
    if (error instanceof StepFault || error instanceof SyntaxError) out({ error: error.message });
    else out({ error: `crash: ${error.name}: ${error.message}` });
  }
}
