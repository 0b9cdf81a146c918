package kpurgatory.kafka;

import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * An executor that runs each task on the caller's thread, inside the call that submits it
 * (the kit's InlineExecutor, docs/conformance.md "An inline executor").
 *
 * With --inline the adapter puts one in place of each SystemTimer's own thread pool, so a
 * task due in a drain runs inside Kafka's advanceClock, bucket by bucket, while the flush
 * is under way: its on_run steps then meet Kafka's timer in exactly the state Kafka's
 * flush leaves it. submit() wraps the task in a FutureTask as Kafka's pool does, so an
 * exception a task throws is kept in the Future and never reaches the drain (Kafka drops
 * it). After shutdown() (SystemTimer.close) every submit is refused with
 * RejectedExecutionException, as Kafka's shut-down pool refuses it.
 */
final class InlineExecutor extends AbstractExecutorService {
    private volatile boolean shutdown;
    /** Adds under way (addThenRun): Kafka's add holds the timer's read lock meanwhile. */
    private int adding;
    /** Tasks an add handed over, run once the outermost add has returned. */
    private final ArrayDeque<Runnable> handedOverInAdd = new ArrayDeque<>();

    @Override
    public void execute(Runnable command) {
        if (shutdown) throw new RejectedExecutionException("the executor is shut down");
        if (adding > 0) {
            handedOverInAdd.add(command);
            return;
        }
        command.run();
    }

    /**
     * Runs {@code add} (a SystemTimer.add), then the tasks it handed over, once it has
     * returned. Kafka's add hands a task due at once to the executor while it holds the
     * timer's read lock, and a ReentrantReadWriteLock is never upgraded: a task run right
     * there that advances its own timer waits for the write lock for ever. Kafka's own
     * executor is another thread, so it never meets this; running those tasks just after
     * the add, before the step is answered, is what that thread would do first. The
     * drain's tasks still run inside advanceClock, bucket by bucket. (--inline-in-add
     * runs them inside the add, as a port that runs tasks under its lock would.)
     */
    void addThenRun(Runnable add) {
        if (runInAdd) {
            add.run();
            return;
        }
        adding++;
        try {
            add.run();
        } finally {
            adding--;
        }
        if (adding == 0) {
            Runnable next;
            while ((next = handedOverInAdd.poll()) != null) next.run();
        }
    }

    /** --inline-in-add: tasks an add hands over run inside it, under its read lock. */
    static boolean runInAdd;

    @Override
    public void shutdown() {
        shutdown = true;
    }

    @Override
    public List<Runnable> shutdownNow() {
        shutdown = true;
        return List.of();
    }

    @Override
    public boolean isShutdown() {
        return shutdown;
    }

    @Override
    public boolean isTerminated() {
        return shutdown;
    }

    @Override
    public boolean awaitTermination(long timeout, TimeUnit unit) {
        return shutdown;
    }
}
