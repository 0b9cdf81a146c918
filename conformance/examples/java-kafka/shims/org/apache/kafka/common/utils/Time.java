package org.apache.kafka.common.utils;

/**
 * Shim for Kafka's org.apache.kafka.common.utils.Time (kafka-clients), written for the
 * conformance adapter: only the readings the timer and purgatory classes call.
 *
 * Kafka's SystemTimer and TimerTaskList read Time.SYSTEM directly (there is no way to
 * pass them a clock), so here Time.SYSTEM is the kit's manual clock: it reads what the
 * adapter last set and never moves by itself. Kafka's DelayQueue polls are then driven
 * by that reading (a bucket is expired when its expiration is at or before it).
 */
public interface Time {

    /** The manual clock every Kafka class reads; the adapter sets it. */
    Manual SYSTEM = new Manual();

    long milliseconds();

    long hiResClockMs();

    /** A clock that reads only what the adapter set. */
    final class Manual implements Time {
        private volatile long nowMs;

        public void set(long ms) {
            nowMs = ms;
        }

        @Override
        public long milliseconds() {
            return nowMs;
        }

        @Override
        public long hiResClockMs() {
            return nowMs;
        }
    }
}
