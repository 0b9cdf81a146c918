package kpurgatory.kafka;

import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.util.timer.SystemTimer;
import org.apache.kafka.server.util.timer.TimerTask;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
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
 * and advance's timeout before it calls advanceClock(0)); tasks run on SystemTimer's
 * own executor thread, so the adapter declares async_run and waits for that executor
 * to go idle before it answers a step.
 */
public final class KafkaAdapter {

    static final Time.Manual TIME = Time.SYSTEM;

    /** The step kinds and features Kafka's classes do not offer (declared at init). */
    static final List<Object> WITHOUT = List.of("next_due_time");

    public static void main(String[] args) throws Exception {
        boolean purgatory = List.of(args).contains("--purgatory");
        boolean settle = !List.of(args).contains("--no-settle");
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
                    run = new Run(step, purgatory, settle);
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

    /** One run: what an init creates, and the answers to its steps. */
    static final class Run {
        final long tickMs;
        final Map<String, SystemTimer> timers = new LinkedHashMap<>();
        final Map<String, ExecutorService> executors = new HashMap<>();
        final Map<String, AdapterTask> tasks = new HashMap<>();
        final List<Object> events = Collections.synchronizedList(new ArrayList<>());
        final PurgatoryDriver purgatory;
        final boolean settle;

        Run(Map<String, Object> init, boolean withPurgatory, boolean settle) {
            this.settle = settle;
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
                executors.put((String) label, executorOf(timer));
            }
            purgatory = withPurgatory ? PurgatoryDriver.create(this, init) : null;
        }

        Map<String, Object> initAnswer() {
            Map<String, Object> answer = observation(null, null);
            answer.put("capabilities", Map.of("without", WITHOUT, "async_run", true));
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
            return observation(result, raised);
        }

        Object call(Map<String, Object> step) throws Exception {
            String kind = stringField(step, "step", "");
            switch (kind) {
                case "add": {
                    Object onRun = step.getOrDefault("on_run", List.of());
                    if (!(onRun instanceof List) || !((List<?>) onRun).isEmpty()) {
                        throw new StepFault("on_run is not supported: Kafka runs tasks on its executor thread");
                    }
                    String label = stringField(step, "task", "");
                    if (purgatory != null && purgatory.has(label)) {
                        throw new StepFault("add names an operation: " + label);
                    }
                    long delayMs = longField(step, "delay_ms", 0);
                    AdapterTask task = tasks.computeIfAbsent(label, name -> new AdapterTask(this, name, delayMs));
                    if (task.delayMs != delayMs) throw new StepFault("a re-add must repeat delay_ms");
                    SystemTimer timer = timer(step);
                    task.dueMs = dueMs(delayMs);
                    timer.add(task);
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
    }

    /** A task of the kit: Kafka's TimerTask whose run records a task_ran event. */
    static final class AdapterTask extends TimerTask {
        final Run run;
        final String label;
        volatile long dueMs;

        AdapterTask(Run run, String label, long delayMs) {
            super(delayMs);
            this.run = run;
            this.label = label;
        }

        @Override
        public void run() {
            Map<String, Object> event = new LinkedHashMap<>();
            event.put("kind", "task_ran");
            event.put("task", label);
            event.put("at_ms", TIME.hiResClockMs());
            event.put("unit", label);
            event.put("due_ms", dueMs);
            run.record(event);
        }
    }
}
