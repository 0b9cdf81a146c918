package org.apache.kafka.server.util;

import java.util.concurrent.CountDownLatch;

/**
 * Shim for Kafka's org.apache.kafka.server.util.ShutdownableThread (server-common): a
 * thread that calls doWork() until it is asked to stop. DelayedOperationPurgatory's
 * expiration reaper extends it; the adapter builds the purgatory with the reaper
 * disabled (the kit drives the clock itself), so this thread is created but never started.
 */
public abstract class ShutdownableThread extends Thread {
    private final CountDownLatch shutdownInitiated = new CountDownLatch(1);
    private final CountDownLatch shutdownComplete = new CountDownLatch(1);
    private volatile boolean started;

    public ShutdownableThread(String name, boolean isInterruptible) {
        super(name);
        setDaemon(false);
    }

    public abstract void doWork();

    public boolean isRunning() {
        return shutdownInitiated.getCount() > 0;
    }

    public void initiateShutdown() {
        shutdownInitiated.countDown();
    }

    public void awaitShutdown() throws InterruptedException {
        if (started) shutdownComplete.await();
    }

    @Override
    public synchronized void start() {
        started = true;
        super.start();
    }

    @Override
    public void run() {
        try {
            while (isRunning()) doWork();
        } finally {
            shutdownComplete.countDown();
        }
    }
}
