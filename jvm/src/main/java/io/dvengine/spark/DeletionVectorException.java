package io.dvengine.spark;

/**
 * A deletion vector that cannot be trusted (missing, truncated, bad CRC, wrong cardinality ...)
 * or a data file read without the DV the driver promised. Failing the task is the only safe
 * behaviour: reading on would resurrect or hide rows.
 */
public final class DeletionVectorException extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    DeletionVectorException(String message) {
        super("dvengine: " + message);
    }

    DeletionVectorException(String message, Throwable cause) {
        super("dvengine: " + message, cause);
    }
}
