package org.slf4j;

/** Shim for SLF4J's LoggerFactory: every logger discards what it is given. */
public final class LoggerFactory {
    private LoggerFactory() {
    }

    public static Logger getLogger(Class<?> owner) {
        return (format, arguments) -> { };
    }
}
