package org.slf4j;

/**
 * Shim for SLF4J's Logger: the purgatory logs at debug level only; the adapter writes
 * nothing (stdout carries the protocol's answers alone).
 */
public interface Logger {
    void debug(String format, Object... arguments);
}
