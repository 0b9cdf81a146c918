package kpurgatory.kafka;

import org.apache.kafka.server.util.timer.TimerTask;

import java.util.Map;

/**
 * The purgatory steps, when Kafka's DelayedOperationPurgatory was compiled in
 * (KafkaPurgatory, loaded by name so that a timer-only build needs none of its sources).
 */
abstract class PurgatoryDriver {

    static PurgatoryDriver create(KafkaAdapter.Run run, Map<String, Object> init) {
        try {
            Class<?> driver = Class.forName("kpurgatory.kafka.KafkaPurgatory");
            return (PurgatoryDriver) driver
                .getDeclaredConstructor(KafkaAdapter.Run.class, Map.class)
                .newInstance(run, init);
        } catch (ReflectiveOperationException exc) {
            throw new IllegalStateException("the purgatory driver is not compiled in: " + exc);
        }
    }

    abstract boolean has(String label);

    abstract TimerTask operation(String label);

    abstract boolean handles(String kind);

    /** A new step begins: forget the tries counted for the last one. */
    abstract void beginStep();

    abstract Object call(String kind, Map<String, Object> step) throws Exception;

    abstract void observe(Map<String, Object> state, Map<String, Object> tries);

    abstract void close();
}
