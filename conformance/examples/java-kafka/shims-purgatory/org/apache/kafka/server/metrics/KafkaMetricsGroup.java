package org.apache.kafka.server.metrics;

import java.util.Map;
import java.util.function.Supplier;

/**
 * Shim for Kafka's org.apache.kafka.server.metrics.KafkaMetricsGroup (server-common, over
 * Yammer metrics): DelayedOperationPurgatory registers two gauges and removes them at
 * shutdown. The adapter reads the same numbers through the purgatory's public watched()
 * and numDelayed(), so the shim registers nothing.
 */
public class KafkaMetricsGroup {

    public KafkaMetricsGroup(String packageName, String simpleName) {
    }

    public <T> void newGauge(String name, Supplier<T> metric, Map<String, String> tags) {
    }

    public void removeMetric(String name, Map<String, String> tags) {
    }
}
