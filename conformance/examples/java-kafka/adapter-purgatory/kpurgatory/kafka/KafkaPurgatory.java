package kpurgatory.kafka;

import org.apache.kafka.server.purgatory.DelayedOperation;
import org.apache.kafka.server.purgatory.DelayedOperationKey;
import org.apache.kafka.server.purgatory.DelayedOperationPurgatory;
import org.apache.kafka.server.util.timer.SystemTimer;
import org.apache.kafka.server.util.timer.Timer;
import org.apache.kafka.server.util.timer.TimerTask;

import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The purgatory steps over Kafka's DelayedOperationPurgatory (Kafka 4.0+, Java), built as
 * the kit's init says: the first timer of the run, purge_interval, no reaper (the kit
 * drives the clock), timer_enabled. Its advanceClock is private in Kafka (only the reaper
 * calls it) and two of the kit's counts have no accessor, so those three are read by
 * reflection; num_purged is only logged by Kafka and is answered null (absent).
 *
 * Unless the adapter runs with --no-settle, the purgatory gets Kafka's SystemTimer behind
 * Kafka's own Timer interface (SettledTimer) whose advanceClock returns only once the
 * executor has run what it was handed. Without it, the purge check at the end of the
 * purgatory's advanceClock races the executor's expiry of the operations that same call
 * handed over (README.md, "The purge races the expiry").
 */
final class KafkaPurgatory extends PurgatoryDriver {
    private static final Set<String> KINDS = Set.of(
        "watch", "set_ready", "check_and_complete", "force_complete", "cancel_for_key",
        "purgatory_advance", "shutdown");

    private final KafkaAdapter.Run run;
    private final DelayedOperationPurgatory<FlagOperation> purgatory;
    private final Map<String, FlagOperation> operations = new HashMap<>();
    private final Map<String, Long> stepTries = new LinkedHashMap<>();
    private final Method advanceClock;

    KafkaPurgatory(KafkaAdapter.Run run, Map<String, Object> init) throws ReflectiveOperationException {
        this.run = run;
        long purgeInterval = KafkaAdapter.longField(init, "purge_interval", 1000);
        Object timerEnabled = init.getOrDefault("timer_enabled", true);
        if (!(timerEnabled instanceof Boolean)) throw new KafkaAdapter.StepFault("timer_enabled must be true or false");
        SystemTimer systemTimer = run.timers.values().iterator().next();
        Timer timer = run.settle ? new SettledTimer(systemTimer, run) : systemTimer;
        purgatory = new DelayedOperationPurgatory<>(
            "conformance", timer, 0, (int) purgeInterval, false, (Boolean) timerEnabled);
        advanceClock = DelayedOperationPurgatory.class.getDeclaredMethod("advanceClock", long.class);
        advanceClock.setAccessible(true);
    }

    @Override
    boolean has(String label) {
        return operations.containsKey(label);
    }

    @Override
    TimerTask operation(String label) {
        return operations.get(label);
    }

    @Override
    boolean handles(String kind) {
        return KINDS.contains(kind);
    }

    private FlagOperation existing(Map<String, Object> step) {
        String label = KafkaAdapter.stringField(step, "operation", "");
        FlagOperation operation = operations.get(label);
        if (operation == null) throw new KafkaAdapter.StepFault("unknown operation " + label);
        return operation;
    }

    private static StepKey key(Object value) {
        if (!(value instanceof String) && !(value instanceof Long)) {
            throw new KafkaAdapter.StepFault("a key is a string or an integer, got " + value);
        }
        return new StepKey(value);
    }

    @Override
    void beginStep() {
        stepTries.clear();
    }

    /** Calls the purgatory for one step (or a task's on_run step), with the kind of call that
     * completes an operation meanwhile (via) pushed for the completions it causes. */
    @Override
    Object call(String kind, Map<String, Object> step) throws Exception {
        String via = kind.equals("watch") ? "try_complete_else_watch" : kind;
        KafkaAdapter.Context context = KafkaAdapter.CONTEXT.get();
        context.via.addLast(via);
        try {
            return perform(kind, step);
        } finally {
            context.via.removeLast();
        }
    }

    private Object perform(String kind, Map<String, Object> step) throws Exception {
        switch (kind) {
            case "watch": {
                String label = KafkaAdapter.stringField(step, "operation", "");
                if (run.tasks.containsKey(label)) throw new KafkaAdapter.StepFault("watch names a task: " + label);
                long delayMs = KafkaAdapter.longField(step, "delay_ms", 0);
                Object keys = step.get("keys");
                if (!(keys instanceof List)) throw new KafkaAdapter.StepFault("keys must be a list");
                Object ready = step.getOrDefault("ready", false);
                Object readyOnTry = step.get("ready_on_try");
                if (!(ready instanceof Boolean) || (readyOnTry != null && !(readyOnTry instanceof Long))) {
                    throw new KafkaAdapter.StepFault("ready must be a boolean and ready_on_try an integer or null");
                }
                FlagOperation operation = operations.get(label);
                if (operation == null) {
                    operation = new FlagOperation(label, delayMs, (Boolean) ready, (Long) readyOnTry, keys);
                    operations.put(label, operation);
                } else if (operation.delayMs != delayMs || !operation.keys.equals(keys)
                        || operation.firstReady != (Boolean) ready || !Objects.equals(operation.readyOnTry, readyOnTry)) {
                    throw new KafkaAdapter.StepFault("a repeated watch must repeat every field of the first");
                }
                List<StepKey> watchKeys = new ArrayList<>();
                for (Object value : (List<?>) keys) watchKeys.add(key(value));
                long previous = operation.dueMs;
                operation.dueMs = run.dueMs(delayMs);
                try {
                    return purgatory.tryCompleteElseWatch(operation, watchKeys);
                } catch (RuntimeException refused) {
                    operation.dueMs = previous; // nothing was scheduled: a schedule in force keeps its due time
                    throw refused;
                }
            }
            case "set_ready": {
                Object ready = step.getOrDefault("ready", true);
                if (!(ready instanceof Boolean)) throw new KafkaAdapter.StepFault("ready must be a boolean");
                existing(step).ready = (Boolean) ready;
                return null;
            }
            case "check_and_complete":
                return (long) purgatory.checkAndComplete(key(step.get("key")));
            case "force_complete":
                return existing(step).forceComplete();
            case "cancel_for_key": {
                List<Object> labels = new ArrayList<>();
                for (FlagOperation operation : purgatory.cancelForKey(key(step.get("key")))) {
                    labels.add(operation.label);
                }
                return labels;
            }
            case "purgatory_advance": {
                long ms = KafkaAdapter.longField(step, "ms", 0);
                if (ms >= 0) KafkaAdapter.TIME.set(KafkaAdapter.TIME.hiResClockMs() + ms);
                try {
                    advanceClock.invoke(purgatory, ms < 0 ? ms : 0L);
                } catch (InvocationTargetException exc) {
                    Throwable cause = exc.getCause();
                    if (cause instanceof Exception) throw (Exception) cause;
                    throw exc;
                }
                return null;
            }
            case "shutdown":
                purgatory.shutdown();
                return null;
            default:
                throw new KafkaAdapter.StepFault("unsupported step kind " + kind);
        }
    }

    @Override
    void observe(Map<String, Object> state, Map<String, Object> tries) {
        state.put("watched", (long) purgatory.watched());
        state.put("num_delayed", (long) purgatory.numDelayed());
        state.put("watched_keys", watchedKeys());
        state.put("num_purged", null); // Kafka only logs each purge's count
        state.put("estimated_total_operations", (long) privateField(purgatory, "estimatedTotalOperations", AtomicInteger.class).get());
        tries.putAll(stepTries);
        stepTries.clear();
    }

    /** The sum over the shards' watchersByKey sizes (docs/vectors.md, watched_keys). */
    private long watchedKeys() {
        long sum = 0;
        for (Object watcherList : privateField(purgatory, "watcherLists", List.class)) {
            sum += privateField(watcherList, "watchersByKey", Map.class).size();
        }
        return sum;
    }

    private static <V> V privateField(Object owner, String name, Class<V> type) {
        try {
            Field field = owner.getClass().getDeclaredField(name);
            field.setAccessible(true);
            return type.cast(field.get(owner));
        } catch (ReflectiveOperationException exc) {
            throw new IllegalStateException("Kafka's " + owner.getClass().getName() + " has no field " + name);
        }
    }

    @Override
    void close() {
        // the run's timers are closed by the run; the purgatory holds nothing else
    }

    /** Kafka's SystemTimer, with an advanceClock that returns once its executor is idle. */
    static final class SettledTimer implements Timer {
        private final SystemTimer timer;
        private final KafkaAdapter.Run run;

        SettledTimer(SystemTimer timer, KafkaAdapter.Run run) {
            this.timer = timer;
            this.run = run;
        }

        @Override
        public void add(TimerTask task) {
            timer.add(task);
        }

        @Override
        public boolean advanceClock(long timeoutMs) throws InterruptedException {
            boolean result = timer.advanceClock(timeoutMs);
            run.awaitIdle();
            return result;
        }

        @Override
        public int size() {
            return timer.size();
        }

        @Override
        public void close() {
            timer.close();
        }
    }

    /** A watch key of the kit: a JSON string or integer (7 and "7" differ). */
    static final class StepKey implements DelayedOperationKey {
        private final Object value;

        StepKey(Object value) {
            this.value = value;
        }

        @Override
        public String keyLabel() {
            return String.valueOf(value);
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof StepKey && ((StepKey) other).value.equals(value);
        }

        @Override
        public int hashCode() {
            return value.hashCode();
        }
    }

    /** The kit's flag operation (docs/vectors.md, "Operations") over Kafka's DelayedOperation. */
    final class FlagOperation extends DelayedOperation {
        final String label;
        final boolean firstReady;
        final Long readyOnTry;
        final Object keys;
        volatile boolean ready;
        volatile long dueMs;
        private long tries;

        FlagOperation(String label, long delayMs, boolean ready, Long readyOnTry, Object keys) {
            super(delayMs);
            this.label = label;
            this.firstReady = ready;
            this.ready = ready;
            this.readyOnTry = readyOnTry;
            this.keys = keys;
        }

        @Override
        public boolean tryComplete() {
            tries += 1;
            stepTries.merge(label, 1L, Long::sum);
            if (readyOnTry != null && tries == readyOnTry) ready = true;
            return ready && forceComplete();
        }

        /** The timer ran the operation (expiry): its events belong to its own hand-over, or
         * to the outermost one if hand-overs nest. */
        @Override
        public void run() {
            KafkaAdapter.Context context = KafkaAdapter.CONTEXT.get();
            boolean entered = context.enter(label, dueMs);
            context.via.addLast("expiry");
            try {
                super.run();
            } finally {
                context.via.removeLast();
                context.exit(entered);
            }
        }

        @Override
        public void onComplete() {
            run.record(run.event("completed", "operation", label));
        }

        @Override
        public void onExpiration() {
            run.record(run.event("expired", "operation", label));
        }
    }
}
