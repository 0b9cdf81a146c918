package kpurgatory.kafka;

import org.apache.kafka.server.purgatory.DelayedOperation;
import org.apache.kafka.server.purgatory.DelayedOperationPurgatory;
import org.apache.kafka.server.util.timer.SystemTimer;
import org.apache.kafka.server.util.timer.Timer;
import org.apache.kafka.server.util.timer.TimerTask;

import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One history of the kit's threads mode (docs/conformance.md, "Checking a port on real
 * threads") over Kafka's own DelayedOperationPurgatory and SystemTimer: a fresh
 * purgatory (no reaper, no purge: purgeInterval 1,000,000) on a fresh SystemTimer (tick
 * 1 ms, 20 slots, the manual clock at 0), the message's operations as flag operations,
 * one Java thread per program thread started together at a barrier, then the clean-up
 * calls on this thread. Each call is answered with System.nanoTime() before and after
 * it, and each callback with its own times and the thread it ran on: the program
 * thread's index, "cleanup", or "executor" for SystemTimer's executor thread, which
 * runs Kafka's expiries (the kit places those in the call in flight around them).
 *
 * As the sequential adapter does by default (SettledTimer), the purgatory gets Kafka's
 * SystemTimer behind Kafka's Timer interface with an add and an advanceClock that return
 * once the executor has run what they handed it, so an expiry runs inside the call that
 * caused it.
 */
final class KafkaThreads {
    /** Serializes the manual clock's read-and-set (two threads may advance at once). */
    private static final Object CLOCK = new Object();
    /** The thread a callback runs on, as the answer names it. */
    private static final ThreadLocal<Object> THREAD = ThreadLocal.withInitial(() -> "executor");
    private static final double YIELD_CHANCE = 0.3;
    private static final long JOIN_MS = 10_000;

    private final SystemTimer timer;
    private final ExecutorService executor;
    private final DelayedOperationPurgatory<FlagOp> purgatory;
    private final Method advanceClock;
    private final List<FlagOp> ops = new ArrayList<>();
    private final List<Object> callbacks = Collections.synchronizedList(new ArrayList<>());
    private final long seed;

    KafkaThreads(Map<String, Object> message) throws ReflectiveOperationException {
        seed = KafkaAdapter.longField(message, "seed", 0);
        KafkaAdapter.TIME.set(0);
        timer = new SystemTimer("threads", 1, 20, 0);
        executor = KafkaAdapter.executorOf(timer);
        purgatory = new DelayedOperationPurgatory<>("threads", new Settled(timer, executor), 0, 1_000_000, false, true);
        advanceClock = DelayedOperationPurgatory.class.getDeclaredMethod("advanceClock", long.class);
        advanceClock.setAccessible(true);
        Object given = message.get("ops");
        if (!(given instanceof List)) throw new KafkaAdapter.StepFault("ops must be a list");
        for (Object entry : (List<?>) given) {
            if (!(entry instanceof Map)) throw new KafkaAdapter.StepFault("each of ops must be an object");
            @SuppressWarnings("unchecked")
            Map<String, Object> op = (Map<String, Object>) entry;
            String label = KafkaAdapter.stringField(op, "operation", "");
            if (!label.equals("op" + ops.size())) throw new KafkaAdapter.StepFault("ops must be op0, op1, ... in order");
            Object keys = op.get("keys");
            if (!(keys instanceof List)) throw new KafkaAdapter.StepFault("keys must be a list");
            List<KafkaPurgatory.StepKey> watchKeys = new ArrayList<>();
            for (Object key : (List<?>) keys) watchKeys.add(new KafkaPurgatory.StepKey(key));
            ops.add(new FlagOp(label, KafkaAdapter.longField(op, "delay_ms", 0), watchKeys));
        }
    }

    /** Runs the message's threads, then its clean-up; the answer. */
    Map<String, Object> run(Map<String, Object> message) throws Exception {
        List<List<Map<String, Object>>> programs = calls(message.get("threads"), "threads");
        List<Map<String, Object>> cleanup = calls(List.of(message.get("cleanup")), "cleanup").get(0);
        boolean serial = Boolean.TRUE.equals(message.get("serial"));
        int count = programs.size();
        List<List<Map<String, Object>>> records = new ArrayList<>();
        for (int i = 0; i < count; i++) records.add(Collections.synchronizedList(new ArrayList<>()));
        CyclicBarrier barrier = new CyclicBarrier(serial ? 1 : count);
        List<Thread> threads = new ArrayList<>();
        List<Object> crashes = Collections.synchronizedList(new ArrayList<>());
        for (int i = 0; i < count; i++) {
            final int index = i;
            Thread thread = new Thread(() -> {
                THREAD.set(index);
                try {
                    barrier.await(JOIN_MS, TimeUnit.MILLISECONDS);
                    runCalls(programs.get(index), records.get(index), new Random(seed * 1009 + index));
                } catch (Exception | Error crash) {
                    crashes.add(crash.getClass().getName() + ": " + crash.getMessage());
                }
            }, "threads-T" + i);
            thread.setDaemon(true);
            threads.add(thread);
        }
        long deadline = System.currentTimeMillis() + JOIN_MS;
        for (Thread thread : threads) {
            thread.start();
            if (serial) thread.join(Math.max(1, deadline - System.currentTimeMillis()));
        }
        List<Object> hung = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            threads.get(i).join(Math.max(1, deadline - System.currentTimeMillis()));
            if (threads.get(i).isAlive()) hung.add((long) i);
        }
        if (!crashes.isEmpty()) throw new KafkaAdapter.Crash(new IllegalStateException(String.valueOf(crashes.get(0))));
        Map<String, Object> answer = new LinkedHashMap<>();
        List<Object> threadRecords = new ArrayList<>();
        for (List<Map<String, Object>> mine : records) {
            synchronized (mine) {
                threadRecords.add(new ArrayList<>(mine));
            }
        }
        answer.put("threads", threadRecords);
        if (!hung.isEmpty()) {
            answer.put("hung", hung);
            answer.put("cleanup", List.of());
            answer.put("callbacks", snapshot());
            answer.put("final", null);
            return answer; // the hung threads are daemons, and this timer is left to them
        }
        List<Map<String, Object>> cleanupRecords = new ArrayList<>();
        THREAD.set("cleanup");
        try {
            runCalls(cleanup, cleanupRecords, new Random(seed * 1009 + count));
        } finally {
            THREAD.remove();
        }
        answer.put("cleanup", cleanupRecords);
        answer.put("callbacks", snapshot());
        Map<String, Object> last = new LinkedHashMap<>();
        last.put("watched", (long) purgatory.watched());
        last.put("watched_keys", watchedKeys());
        last.put("num_delayed", (long) purgatory.numDelayed());
        Map<String, Object> outcomes = new LinkedHashMap<>();
        for (FlagOp op : ops) outcomes.put(op.label, op.isCompleted() ? "completed" : "pending");
        last.put("outcomes", outcomes);
        answer.put("final", last);
        timer.close();
        return answer;
    }

    private List<Object> snapshot() {
        synchronized (callbacks) {
            return new ArrayList<>(callbacks);
        }
    }

    @SuppressWarnings("unchecked")
    private static List<List<Map<String, Object>>> calls(Object given, String name) {
        if (!(given instanceof List)) throw new KafkaAdapter.StepFault(name + " must be a list of call lists");
        List<List<Map<String, Object>>> out = new ArrayList<>();
        for (Object list : (List<?>) given) {
            if (!(list instanceof List)) throw new KafkaAdapter.StepFault(name + " must hold lists of calls");
            List<Map<String, Object>> calls = new ArrayList<>();
            for (Object call : (List<?>) list) {
                if (!(call instanceof Map)) throw new KafkaAdapter.StepFault("a call must be an object");
                calls.add((Map<String, Object>) call);
            }
            out.add(calls);
        }
        return out;
    }

    private void runCalls(List<Map<String, Object>> calls, List<Map<String, Object>> records, Random random) throws Exception {
        YIELDS.set(random);
        for (Map<String, Object> call : calls) {
            Map<String, Object> record = new LinkedHashMap<>();
            long invoke = System.nanoTime();
            record.put("invoke_ns", invoke);
            records.add(record);
            Object result = null;
            String raised = null;
            try {
                result = call(call);
            } catch (KafkaAdapter.StepFault fault) {
                throw fault;
            } catch (Exception error) {
                raised = KafkaAdapter.observed(error);
                if (raised == null) throw new KafkaAdapter.Crash(error);
            }
            record.put("return_ns", System.nanoTime());
            record.put("result", result);
            record.put("raised", raised);
        }
    }

    private FlagOp op(Map<String, Object> call) {
        String label = KafkaAdapter.stringField(call, "operation", "");
        for (FlagOp op : ops) if (op.label.equals(label)) return op;
        throw new KafkaAdapter.StepFault("unknown operation " + label);
    }

    private Object call(Map<String, Object> call) throws Exception {
        String kind = KafkaAdapter.stringField(call, "call", "");
        switch (kind) {
            case "watch": {
                FlagOp op = op(call);
                return purgatory.tryCompleteElseWatch(op, op.keys);
            }
            case "set_ready":
                op(call).ready = true;
                return null;
            case "check_and_complete":
                return (long) purgatory.checkAndComplete(new KafkaPurgatory.StepKey(call.get("key")));
            case "cancel_for_key": {
                List<Object> labels = new ArrayList<>();
                for (FlagOp op : purgatory.cancelForKey(new KafkaPurgatory.StepKey(call.get("key")))) labels.add(op.label);
                return labels;
            }
            case "purgatory_advance": {
                long ms = KafkaAdapter.longField(call, "ms", 0);
                synchronized (CLOCK) {
                    KafkaAdapter.TIME.set(KafkaAdapter.TIME.hiResClockMs() + ms);
                }
                try {
                    advanceClock.invoke(purgatory, 0L);
                } catch (InvocationTargetException exc) {
                    Throwable cause = exc.getCause();
                    if (cause instanceof Exception) throw (Exception) cause;
                    throw exc;
                }
                return null;
            }
            case "force_complete":
                return op(call).forceComplete();
            default:
                throw new KafkaAdapter.StepFault("unsupported call " + kind + " (the adapter declares it lacks it)");
        }
    }

    private long watchedKeys() {
        long sum = 0;
        for (Object watcherList : field(purgatory, "watcherLists", List.class)) {
            sum += field(watcherList, "watchersByKey", Map.class).size();
        }
        return sum;
    }

    private static <V> V field(Object owner, String name, Class<V> type) {
        try {
            Field field = owner.getClass().getDeclaredField(name);
            field.setAccessible(true);
            return type.cast(field.get(owner));
        } catch (ReflectiveOperationException exc) {
            throw new IllegalStateException("Kafka's " + owner.getClass().getName() + " has no field " + name);
        }
    }

    private static final ThreadLocal<Random> YIELDS = ThreadLocal.withInitial(Random::new);

    /** A callback yields its thread now and then: a wider window for the other threads. */
    private static void maybeYield() {
        if (YIELDS.get().nextDouble() < YIELD_CHANCE) Thread.yield();
    }

    private void record(String callback, String label, long start, long end, Boolean ready, Boolean returned, long read) {
        Map<String, Object> record = new LinkedHashMap<>();
        Object thread = THREAD.get();
        record.put("thread", thread instanceof Integer ? (Object) (long) (Integer) thread : thread);
        record.put("operation", label);
        record.put("callback", callback);
        record.put("start_ns", start);
        record.put("end_ns", end);
        if (ready != null) {
            record.put("ready", ready);
            record.put("read_ns", read);
            record.put("returned", returned);
        }
        callbacks.add(record);
    }

    /** The kit's flag operation: try_complete completes it iff the flag is set. */
    final class FlagOp extends DelayedOperation {
        final String label;
        final List<KafkaPurgatory.StepKey> keys;
        volatile boolean ready;

        FlagOp(String label, long delayMs, List<KafkaPurgatory.StepKey> keys) {
            super(delayMs);
            this.label = label;
            this.keys = keys;
        }

        @Override
        public boolean tryComplete() {
            long start = System.nanoTime();
            boolean flag = ready;
            long read = System.nanoTime();
            maybeYield();
            boolean done = flag && forceComplete();
            record("try_complete", label, start, System.nanoTime(), flag, done, read);
            return done;
        }

        @Override
        public void onComplete() {
            long start = System.nanoTime();
            maybeYield();
            record("on_complete", label, start, System.nanoTime(), null, null, 0);
        }

        @Override
        public void onExpiration() {
            long start = System.nanoTime();
            maybeYield();
            record("on_expiration", label, start, System.nanoTime(), null, null, 0);
        }
    }

    /** Kafka's SystemTimer, whose add and advanceClock return once its executor is idle. */
    static final class Settled implements Timer {
        private final SystemTimer timer;
        private final ExecutorService executor;

        Settled(SystemTimer timer, ExecutorService executor) {
            this.timer = timer;
            this.executor = executor;
        }

        private void settle() {
            try {
                executor.submit(() -> { }).get(30, TimeUnit.SECONDS);
            } catch (Exception exc) {
                throw new IllegalStateException("Kafka's executor did not go idle: " + exc);
            }
        }

        @Override
        public void add(TimerTask task) {
            timer.add(task);
            settle();
        }

        @Override
        public boolean advanceClock(long timeoutMs) throws InterruptedException {
            boolean result = timer.advanceClock(timeoutMs);
            settle();
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
}
