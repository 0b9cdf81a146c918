package kpurgatory.kafka;

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

    @Override
    public void execute(Runnable command) {
        if (shutdown) throw new RejectedExecutionException("the executor is shut down");
        command.run();
    }

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
