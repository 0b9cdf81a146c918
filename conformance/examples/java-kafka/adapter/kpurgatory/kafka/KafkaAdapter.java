package kpurgatory.kafka;

import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.util.timer.SystemTimer;
import org.apache.kafka.server.util.timer.TimerTask;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.util.ArrayDeque;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The conformance kit's adapter over upstream Kafka's own timer classes (and, where the
 * purgatory's sources were compiled in, its DelayedOperationPurgatory).
 *
 * One JSON step per line on stdin, one JSON answer per line on stdout, flushed
 * (docs/conformance.md). Kafka's classes are used as they are: the clock they read is
 * the shimmed Time.SYSTEM, which this adapter sets (init's clock_ms, clock_advance,
 * and advance's timeout before it calls advanceClock(0)). By default tasks run on
 * SystemTimer's own executor thread, so the adapter declares async_run and waits for that
 * executor to go idle before it answers a step. With --inline each SystemTimer's executor
 * is replaced by an InlineExecutor: tasks run inside Kafka's drain, bucket by bucket, and
 * a task's on_run steps are performed when it runs (no async_run).
 */
public final class KafkaAdapter {

    static final Time.Manual TIME = Time.SYSTEM;

    /**
     * The step kinds and features Kafka's classes, or this adapter, do not offer (declared
     * at init). negative_time: with a negative current time TimingWheel.add computes a
     * negative bucket index (Java's % keeps the sign) and throws
     * ArrayIndexOutOfBoundsException.
     */
    static final List<Object> WITHOUT = List.of(
            "next_due_time", "close", "executor_shutdown", "callbacks", "negative_time");

    /**
     * Also declared unless --nested-advance: a task that advances a timer. Run inline, a
     * task runs under the timer's lock: inside add (a read lock, which a
     * ReentrantReadWriteLock never upgrades to the write lock advanceClock takes: a
     * deadlock), or inside a flush, where a nested drain can move the wheel past the
     * flushed bucket's slot and the flush then re-adds an entry to the bucket it is
     * emptying, for ever. Kafka's own executor is another thread, so Kafka never meets
     * either; the kit reports both as hangs with --nested-advance (README.md).
     */
    static final List<Object> WITHOUT_NESTED_ADVANCE = List.of(
            "next_due_time", "close", "executor_shutdown", "callbacks", "negative_time",
            "nested_advance");

    public static void main(String[] args) throws Exception {
        boolean purgatory = List.of(args).contains("--purgatory");
        boolean settle = !List.of(args).contains("--no-settle");
        boolean inline = List.of(args).contains("--inline");
        boolean nestedAdvance = List.of(args).contains("--nested-advance");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        Run run = null;
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            Map<String, Object> answer;
            try {
                Object parsed = Json.parse(line);
                if (!(parsed instanceof Map)) throw new IllegalArgumentException("a step is a JSON object");
                @SuppressWarnings("unchecked")
                Map<String, Object> step = (Map<String, Object>) parsed;
                if ("init".equals(step.get("step"))) {
                    if (run != null) run.close();
                    run = new Run(step, purgatory, settle, inline, nestedAdvance);
                    answer = run.initAnswer();
                } else if (run == null) {
                    answer = Map.of("error", "the first step of a run must be init");
                } else {
                    answer = run.answer(step);
                }
            } catch (StepFault fault) {
                answer = Map.of("error", fault.getMessage());
            } catch (IllegalArgumentException bad) {
                answer = Map.of("error", String.valueOf(bad.getMessage()));
            } catch (Exception crash) {
                answer = Map.of("error", "crash: " + crash.getClass().getName() + ": " + crash.getMessage());
            }
            out.println(Json.write(answer));
            out.flush();
        }
        if (run != null) run.close();
        System.exit(0); // the executors' threads are non-daemon (KafkaThread.nonDaemon)
    }

    /** A step the adapter cannot execute: answered {"error": ...}, not an observation. */
    static final class StepFault extends RuntimeException {
        StepFault(String message) {
            super(message);
        }
    }

    /** A crash of Kafka's code that is not part of its contract (an index out of bounds, say). */
    static final class Crash extends RuntimeException {
        Crash(Throwable cause) {
            super(cause.getClass().getName() + ": " + cause.getMessage(), cause);
        }
    }

    /** Maps an exception of Kafka's documented contract onto the kit's three names. */
    static String observed(Throwable error) {
        if (error instanceof IllegalArgumentException) return "ValueError";
        if (error instanceof ClassCastException) return "TypeError";
        if (error instanceof IllegalStateException || error instanceof RejectedExecutionException) {
            return "RuntimeError";
        }
        return null;
    }

    static long longField(Map<String, Object> step, String name, long otherwise) {
        Object value = step.getOrDefault(name, otherwise);
        if (!(value instanceof Long)) throw new StepFault(name + " must be an integer, got " + value);
        return (Long) value;
    }

    static String stringField(Map<String, Object> step, String name, String otherwise) {
        Object value = step.getOrDefault(name, otherwise);
        if (!(value instanceof String)) throw new StepFault(name + " must be a string, got " + value);
        return (String) value;
    }

    /** Kafka's private executor of one SystemTimer (read by reflection, to wait for it). */
    static ExecutorService executorOf(SystemTimer timer) {
        try {
            Field field = SystemTimer.class.getDeclaredField("taskExecutor");
            field.setAccessible(true);
            return (ExecutorService) field.get(timer);
        } catch (ReflectiveOperationException exc) {
            throw new IllegalStateException("SystemTimer has no taskExecutor field: " + exc);
        }
    }

    /** Puts an InlineExecutor in place of one SystemTimer's own pool (--inline): the field is
     * Kafka's private final taskExecutor, written by reflection; the pool it held has started
     * no thread yet (a pool starts its thread on the first task) and is shut down. */
    static ExecutorService inlineExecutorOf(SystemTimer timer) {
        try {
            Field field = SystemTimer.class.getDeclaredField("taskExecutor");
            field.setAccessible(true);
            ((ExecutorService) field.get(timer)).shutdownNow();
            ExecutorService inline = new InlineExecutor();
            field.set(timer, inline);
            return inline;
        } catch (ReflectiveOperationException exc) {
            throw new IllegalStateException("SystemTimer's taskExecutor cannot be replaced: " + exc);
        }
    }

    /** Where the current thread is: the outermost hand-over running (unit, its due time) and
     * the kind of call that would complete an operation now (via), innermost last. A task's
     * run and an operation's expiry happen on Kafka's executor thread without --inline, so
     * each thread has its own. */
    static final class Context {
        String unit;
        Long unitDue;
        final ArrayDeque<String> via = new ArrayDeque<>(List.of("force_complete"));

        /** Enter the hand-over of label (due at dueMs), unless one is already running. */
        boolean enter(String label, long dueMs) {
            if (unit != null) return false;
            unit = label;
            unitDue = dueMs;
            return true;
        }

        void exit(boolean entered) {
            if (entered) {
                unit = null;
                unitDue = null;
            }
        }
    }

    static final ThreadLocal<Context> CONTEXT = ThreadLocal.withInitial(Context::new);

    /** One run: what an init creates, and the answers to its steps. */
    static final class Run {
        final long tickMs;
        final Map<String, SystemTimer> timers = new LinkedHashMap<>();
        final Map<String, ExecutorService> executors = new HashMap<>();
        final Map<String, AdapterTask> tasks = new HashMap<>();
        final List<Object> events = Collections.synchronizedList(new ArrayList<>());
        final PurgatoryDriver purgatory;
        final boolean settle;
        final boolean inline;
        StepFault nestedFault; // an on_run step that does not fit the run: the step's error

        final boolean nestedAdvance;

        Run(Map<String, Object> init, boolean withPurgatory, boolean settle, boolean inline,
                boolean nestedAdvance) {
            this.nestedAdvance = nestedAdvance;
            this.settle = settle;
            this.inline = inline;
            tickMs = longField(init, "tick_ms", 1);
            long wheelSize = longField(init, "wheel_size", 20);
            long startMs = longField(init, "start_ms", 0);
            TIME.set(longField(init, "clock_ms", 0));
            Object labels = init.getOrDefault("timers", List.of("main"));
            if (!(labels instanceof List) || ((List<?>) labels).isEmpty()) {
                throw new StepFault("timers must be a non-empty list of labels");
            }
            for (Object label : (List<?>) labels) {
                if (!(label instanceof String)) throw new StepFault("a timer label must be a string");
                SystemTimer timer = new SystemTimer((String) label, tickMs, (int) wheelSize, startMs);
                timers.put((String) label, timer);
                executors.put((String) label, inline ? inlineExecutorOf(timer) : executorOf(timer));
            }
            purgatory = withPurgatory ? PurgatoryDriver.create(this, init) : null;
        }

        Map<String, Object> initAnswer() {
            Map<String, Object> answer = observation(null, null);
            answer.put("capabilities", Map.of(
                    "without", nestedAdvance ? WITHOUT : WITHOUT_NESTED_ADVANCE, "async_run", !inline));
            return answer;
        }

        /** Every task the executors were handed has run (or the executor is shut down and done). */
        void awaitIdle() throws InterruptedException {
            for (ExecutorService executor : executors.values()) {
                if (!executor.isShutdown()) {
                    try {
                        executor.submit(() -> { }).get(30, TimeUnit.SECONDS);
                        continue;
                    } catch (RejectedExecutionException shutMeanwhile) {
                        // closed by the step: wait for what it was already handed
                    } catch (ExecutionException | TimeoutException exc) {
                        throw new IllegalStateException("Kafka's executor did not go idle: " + exc);
                    }
                }
                if (!executor.awaitTermination(30, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("Kafka's executor did not finish its tasks in 30 s");
                }
            }
        }

        void close() {
            if (purgatory != null) purgatory.close();
            for (SystemTimer timer : timers.values()) timer.close();
        }

        SystemTimer timer(Map<String, Object> step) {
            String label = stringField(step, "timer", "main");
            SystemTimer timer = timers.get(label);
            if (timer == null) throw new StepFault("unknown timer label " + label);
            return timer;
        }

        long dueMs(long delayMs) {
            return Math.floorDiv(TIME.hiResClockMs() + delayMs, tickMs) * tickMs;
        }

        Map<String, Object> answer(Map<String, Object> step) throws Exception {
            events.clear();
            nestedFault = null;
            if (purgatory != null) purgatory.beginStep();
            Object result = null;
            String raised = null;
            try {
                result = call(step);
            } catch (StepFault | Crash fault) {
                throw fault;
            } catch (Exception | AssertionError error) {
                raised = observed(error);
                if (raised == null) throw new Crash(error);
            }
            awaitIdle();
            if (nestedFault != null) throw nestedFault;
            return observation(result, raised);
        }

        /** A task's on_run steps, performed when it runs (--inline): one call of user code, so
         * the first step that raises ends it and the exception is not observed
         * (docs/vectors.md, "on_run"); a step that does not fit the run is the step's error. */
        void perform(String task, List<?> onRun) {
            for (Object inner : onRun) {
                try {
                    if (!(inner instanceof Map)) throw new StepFault("an on_run step is a JSON object");
                    @SuppressWarnings("unchecked")
                    Map<String, Object> step = (Map<String, Object>) inner;
                    call(step);
                } catch (StepFault fault) {
                    if (nestedFault == null) {
                        nestedFault = new StepFault("in the run of task " + task + ": " + fault.getMessage());
                    }
                    return;
                } catch (Exception | AssertionError error) {
                    return;
                }
            }
        }

        Object call(Map<String, Object> step) throws Exception {
            String kind = stringField(step, "step", "");
            switch (kind) {
                case "add": {
                    Object onRun = step.getOrDefault("on_run", List.of());
                    if (!(onRun instanceof List)) throw new StepFault("on_run must be a list of steps");
                    if (!inline && !((List<?>) onRun).isEmpty()) {
                        throw new StepFault("on_run needs --inline: Kafka runs tasks on its executor thread");
                    }
                    String label = stringField(step, "task", "");
                    if (purgatory != null && purgatory.has(label)) {
                        throw new StepFault("add names an operation: " + label);
                    }
                    long delayMs = longField(step, "delay_ms", 0);
                    AdapterTask task = tasks.computeIfAbsent(
                        label, name -> new AdapterTask(this, name, delayMs, (List<?>) onRun));
                    if (task.delayMs != delayMs || !task.onRun.equals(onRun)) {
                        throw new StepFault("a re-add must repeat delay_ms and on_run");
                    }
                    SystemTimer timer = timer(step);
                    long previous = task.dueMs;
                    task.dueMs = dueMs(delayMs);
                    try {
                        timer.add(task);
                    } catch (RuntimeException refused) {
                        task.dueMs = previous; // nothing was scheduled: a schedule in force keeps its due time
                        throw refused;
                    }
                    return null;
                }
                case "cancel": {
                    String label = stringField(step, "task", "");
                    TimerTask task = tasks.get(label);
                    if (task == null && purgatory != null) task = purgatory.operation(label);
                    if (task == null) throw new StepFault("unknown task " + label);
                    task.cancel();
                    return null;
                }
                case "advance": {
                    long ms = longField(step, "ms", 0);
                    SystemTimer timer = timer(step);
                    if (ms < 0) return timer.advanceClock(ms); // Kafka's own answer to a negative timeout
                    TIME.set(TIME.hiResClockMs() + ms);
                    return timer.advanceClock(0);
                }
                case "clock_advance": {
                    long ms = longField(step, "ms", 0);
                    if (ms < 0) throw new IllegalArgumentException("ms must be >= 0, got " + ms);
                    TIME.set(TIME.hiResClockMs() + ms);
                    return null;
                }
                default:
                    if (purgatory != null && purgatory.handles(kind)) return purgatory.call(kind, step);
                    throw new StepFault("unsupported step kind " + kind);
            }
        }

        Map<String, Object> observation(Object result, String raised) {
            Map<String, Object> answer = new LinkedHashMap<>();
            answer.put("result", result);
            answer.put("raised", raised);
            synchronized (events) {
                answer.put("events", new ArrayList<>(events));
            }
            Map<String, Object> state = new LinkedHashMap<>();
            state.put("clock_ms", TIME.hiResClockMs());
            Map<String, Object> sizes = new LinkedHashMap<>();
            for (Map.Entry<String, SystemTimer> entry : timers.entrySet()) {
                sizes.put(entry.getKey(), (long) entry.getValue().size());
            }
            state.put("timer_sizes", sizes);
            Map<String, Object> tries = new LinkedHashMap<>();
            if (purgatory != null) purgatory.observe(state, tries);
            answer.put("tries", tries);
            answer.put("state", state);
            return answer;
        }

        void record(Map<String, Object> event) {
            events.add(event);
        }

        /** An event of kind about label (a "task" or an "operation"), at the clock's reading,
         * within the current thread's hand-over (unit null when the step's call caused it). */
        Map<String, Object> event(String kind, String field, String label) {
            Context context = CONTEXT.get();
            Map<String, Object> event = new LinkedHashMap<>();
            event.put("kind", kind);
            event.put(field, label);
            event.put("at_ms", TIME.hiResClockMs());
            if (kind.equals("completed")) event.put("via", context.via.peekLast());
            event.put("unit", context.unit);
            event.put("due_ms", context.unitDue);
            return event;
        }
    }

    /** A task of the kit: Kafka's TimerTask whose run records a task_ran event within the
     * current hand-over (its own, or the outermost one if hand-overs nest), then performs
     * its on_run steps (--inline). */
    static final class AdapterTask extends TimerTask {
        final Run run;
        final String label;
        final List<?> onRun;
        volatile long dueMs;

        AdapterTask(Run run, String label, long delayMs, List<?> onRun) {
            super(delayMs);
            this.run = run;
            this.label = label;
            this.onRun = onRun;
        }

        @Override
        public void run() {
            Context context = CONTEXT.get();
            boolean entered = context.enter(label, dueMs);
            try {
                run.record(run.event("task_ran", "task", label));
                run.perform(label, onRun);
            } finally {
                context.exit(entered);
            }
        }
    }
}
