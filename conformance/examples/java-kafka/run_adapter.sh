#!/bin/sh
# The conformance kit's adapter over upstream Apache Kafka's own timer (and purgatory)
# classes, read from the Kafka source tree named by KAFKA_SOURCE:
#
#   KAFKA_SOURCE=/path/to/kafka kpurgatory conformance \
#       --adapter "sh conformance/examples/java-kafka/run_adapter.sh" --timer-only --stateful --allow kafka
#
# Compiles Kafka's files with this directory's shims and adapter (javac, Java 11 or
# later) into a fresh temporary directory, runs the adapter there and removes it on exit.
# Options: --timer-only compiles and drives the timer alone, even where the tree has the
# purgatory's Java sources (server-common's org/apache/kafka/server/purgatory, Kafka 4.0+);
# --no-settle lets the purgatory's purge check race its executor's expiries (README.md);
# --inline runs tasks inside Kafka's drain on an inline executor (on_run steps sent);
# --nested-advance stops declaring that a task cannot advance a timer, which Kafka's
# classes run inline cannot do (README.md: the kit then reports the hangs).
# --threads adds the kit's threads mode (kpurgatory conformance --threads: programs run on
# real threads over Kafka's purgatory; needs the purgatory's Java sources).
set -eu
timer_only=""
threads=""
adapter_args=""
main_class=kpurgatory.kafka.KafkaAdapter
for arg in "$@"; do
    case "$arg" in
        --timer-only) timer_only=yes ;;
        --no-settle) adapter_args="$adapter_args --no-settle" ;;
        --inline) adapter_args="$adapter_args --inline" ;;
        --nested-advance) adapter_args="$adapter_args --nested-advance" ;;
        --threads) threads=yes; main_class=kpurgatory.kafka.ThreadsAdapter ;;
        *) echo "run_adapter.sh: unknown option $arg (--timer-only, --no-settle, --inline, --nested-advance, --threads)" >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${KAFKA_SOURCE:-}" ] || [ ! -d "$KAFKA_SOURCE" ]; then
    echo "run_adapter.sh: set KAFKA_SOURCE to a Kafka source tree (a directory)" >&2
    exit 2
fi
main="$KAFKA_SOURCE/server-common/src/main/java/org/apache/kafka/server"
timer_files="Timer TimerTask TimerTaskEntry TimerTaskList TimingWheel SystemTimer"
purgatory_files="DelayedOperationKey DelayedOperation DelayedOperationPurgatory"
sources=""
for name in $timer_files; do
    file="$main/util/timer/$name.java"
    if [ ! -f "$file" ]; then
        echo "run_adapter.sh: $file not found (KAFKA_SOURCE must hold Kafka 3.6 or later)" >&2
        exit 2
    fi
    sources="$sources $file"
done
if [ -z "$timer_only" ] && [ -f "$main/purgatory/DelayedOperationPurgatory.java" ]; then
    adapter_args="$adapter_args --purgatory"
    for name in $purgatory_files; do
        sources="$sources $main/purgatory/$name.java"
    done
    sources="$sources $(find "$here/shims-purgatory" "$here/adapter-purgatory" -name '*.java' | tr '\n' ' ')"
fi
if [ -n "$threads" ]; then
    if [ -n "$timer_only" ] || [ ! -f "$main/purgatory/DelayedOperationPurgatory.java" ]; then
        echo "run_adapter.sh: --threads needs the purgatory's Java sources (Kafka 4.0+) and no --timer-only" >&2
        exit 2
    fi
    sources="$sources $(find "$here/adapter-threads" -name '*.java' | tr '\n' ' ')"
fi
sources="$sources $(find "$here/shims" "$here/adapter" -name '*.java' | tr '\n' ' ')"
classes=$(mktemp -d "${TMPDIR:-/tmp}/kafka-adapter.XXXXXX")
trap 'rm -rf "$classes"' EXIT INT TERM
# shellcheck disable=SC2086  # the file list is meant to split
javac -nowarn -Xlint:none -d "$classes" $sources >&2
# shellcheck disable=SC2086
java -cp "$classes" "$main_class" $adapter_args
