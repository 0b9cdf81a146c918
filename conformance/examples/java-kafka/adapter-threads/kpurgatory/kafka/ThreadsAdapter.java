package kpurgatory.kafka;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * KafkaAdapter with the kit's threads mode (run_adapter.sh --threads): the same
 * answers to every step, and a "threads" message answered by KafkaThreads (one history
 * of a program run on real threads over Kafka's DelayedOperationPurgatory). Its init
 * answers also declare the calls Kafka's API does not offer a threads program:
 * abandon, safe_try_complete (package-private in Kafka) and maybe_try_complete (gone
 * since Kafka 2.7, KAFKA-8334's fix).
 */
public final class ThreadsAdapter {
    static final List<Object> WITHOUT_THREADS_CALLS = List.of("abandon", "safe_try_complete", "maybe_try_complete");

    public static void main(String[] args) throws Exception {
        boolean settle = !List.of(args).contains("--no-settle");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        KafkaAdapter.Run run = null;
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            Map<String, Object> answer;
            try {
                Object parsed = Json.parse(line);
                if (!(parsed instanceof Map)) throw new IllegalArgumentException("a step is a JSON object");
                @SuppressWarnings("unchecked")
                Map<String, Object> step = (Map<String, Object>) parsed;
                if ("threads".equals(step.get("step"))) {
                    answer = new KafkaThreads(step).run(step);
                } else if ("init".equals(step.get("step"))) {
                    if (run != null) run.close();
                    run = new KafkaAdapter.Run(step, true, settle, false, false);
                    answer = new LinkedHashMap<>(run.initAnswer());
                    List<Object> without = new ArrayList<>(KafkaAdapter.WITHOUT);
                    without.addAll(WITHOUT_THREADS_CALLS);
                    answer.put("capabilities", Map.of("without", without, "async_run", true));
                } else if (run == null) {
                    answer = Map.of("error", "the first step of a run must be init");
                } else {
                    answer = run.answer(step);
                }
            } catch (KafkaAdapter.StepFault fault) {
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
}
