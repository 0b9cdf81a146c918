package org.apache.kafka.common.utils;

/**
 * Shim for Kafka's org.apache.kafka.common.utils.KafkaThread (kafka-clients): a named
 * thread, as SystemTimer's executor asks for. Kafka's class also installs an uncaught
 * exception handler that logs; the executor's tasks run inside a Future here, which
 * catches every exception first, so the handler is never reached from the timer.
 */
public class KafkaThread extends Thread {

    public KafkaThread(String name, Runnable runnable, boolean daemon) {
        super(runnable, name);
        setDaemon(daemon);
    }

    public static KafkaThread daemon(String name, Runnable runnable) {
        return new KafkaThread(name, runnable, true);
    }

    public static KafkaThread nonDaemon(String name, Runnable runnable) {
        return new KafkaThread(name, runnable, false);
    }
}
