package io.dvengine.spark;

import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Copies the rows of a batch that a DV keeps into vectors of its own, so the scan's output holds
 * live rows only and no filter is needed above it.
 *
 * <p>The alternative, a marker column and a {@code Filter(is_row_deleted = 0)} over the scan (what
 * Delta Spark does), makes every row of every file pay for the filter, files without a DV included:
 * measured here as 8-10 % of a plain scan. Copying costs only batches that lose rows, in files that
 * have a DV; a batch that loses none is passed through as it is.
 *
 * <p>Only atomic types are copied (the Python side asks for this mode only then; see
 * {@link #supports}); the output vectors are reused from batch to batch, as Spark's own vectorized
 * reader reuses its vectors, because a batch is consumed before the next one is asked for. They
 * come from {@link TaskVectors} (the class the scan's generated code expects); partition columns
 * are per-file constants and pass through as the reader made them.
 */
final class SurvivingRows {
    private final DataType[] types; // the copied (data) columns
    private final boolean offHeap;
    private WritableColumnVector[] out;
    private int capacity;
    private int[] keep; // positions of the surviving rows of the current batch

    SurvivingRows(DataType[] types, boolean offHeap) {
        this.types = types;
        this.offHeap = offHeap;
    }

    /** Whether every field is of a type {@link #copy} handles. */
    static boolean supports(StructType schema) {
        for (StructField f : schema.fields()) {
            if (!atomic(f.dataType())) {
                return false;
            }
        }
        return true;
    }

    private static boolean atomic(DataType t) {
        return t instanceof BooleanType || t instanceof ByteType || t instanceof ShortType
                || t instanceof IntegerType || t instanceof DateType || t instanceof LongType
                || t instanceof TimestampType || t instanceof TimestampNTZType || t instanceof FloatType
                || t instanceof DoubleType || t instanceof DecimalType || t instanceof StringType
                || t instanceof BinaryType;
    }

    /**
     * A batch of the rows of {@code columns} whose {@code deleted} byte is 0, {@code survivors} of
     * them out of {@code n}: the first {@code types.length} columns are copied, the rest (partition
     * constants) passed through.
     */
    ColumnarBatch keep(ColumnVector[] columns, int n, ColumnVector deleted, int survivors) {
        if (out == null || capacity < n) {
            close();
            capacity = Math.max(n, 4096);
            out = new WritableColumnVector[types.length];
            for (int c = 0; c < types.length; c++) {
                out[c] = TaskVectors.allocate(capacity, types[c], offHeap);
            }
        }
        int[] rows = survivingRows(n, deleted, survivors);
        ColumnVector[] kept = new ColumnVector[columns.length];
        for (int c = 0; c < columns.length; c++) {
            if (c < types.length) {
                out[c].reset();
                copy(columns[c], out[c], types[c], rows, survivors);
                kept[c] = out[c];
            } else {
                kept[c] = columns[c];
            }
        }
        return new ColumnarBatch(kept, survivors);
    }

    /** The positions of the surviving rows, in order (one pass over the marks for all columns). */
    private int[] survivingRows(int n, ColumnVector deleted, int survivors) {
        if (keep == null || keep.length < survivors) {
            keep = new int[Math.max(survivors, 4096)];
        }
        int j = 0;
        for (int i = 0; i < n; i++) {
            if (deleted.getByte(i) == 0) {
                keep[j++] = i;
            }
        }
        return keep;
    }

    private void close() {
        if (out != null) {
            for (WritableColumnVector v : out) {
                v.close();
            }
            out = null;
        }
    }

    /**
     * Copies rows {@code rows[0..count)} of {@code src} to rows 0.. of {@code dst}. The common
     * types get a loop of their own (one type test per column, not per value) and skip the null
     * test when the source has no nulls.
     */
    private static void copy(ColumnVector src, WritableColumnVector dst, DataType t, int[] rows, int count) {
        boolean nulls = src.hasNull();
        if (t instanceof LongType || t instanceof TimestampType || t instanceof TimestampNTZType) {
            for (int j = 0; j < count; j++) {
                int i = rows[j];
                if (nulls && src.isNullAt(i)) {
                    dst.putNull(j);
                } else {
                    dst.putLong(j, src.getLong(i));
                }
            }
        } else if (t instanceof DoubleType) {
            for (int j = 0; j < count; j++) {
                int i = rows[j];
                if (nulls && src.isNullAt(i)) {
                    dst.putNull(j);
                } else {
                    dst.putDouble(j, src.getDouble(i));
                }
            }
        } else if (t instanceof IntegerType || t instanceof DateType) {
            for (int j = 0; j < count; j++) {
                int i = rows[j];
                if (nulls && src.isNullAt(i)) {
                    dst.putNull(j);
                } else {
                    dst.putInt(j, src.getInt(i));
                }
            }
        } else {
            for (int j = 0; j < count; j++) {
                int i = rows[j];
                if (src.isNullAt(i)) {
                    dst.putNull(j);
                } else {
                    copyValue(src, i, dst, j, t);
                }
            }
        }
    }

    /** A string's bytes straight from the array it lives in (no copy per value) when on-heap. */
    private static void putString(WritableColumnVector dst, int j, UTF8String value) {
        Object base = value.getBaseObject();
        if (base instanceof byte[]) {
            dst.putByteArray(j, (byte[]) base, (int) (value.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET), value.numBytes());
        } else {
            dst.putByteArray(j, value.getBytes());
        }
    }

    private static void copyValue(ColumnVector src, int i, WritableColumnVector dst, int j, DataType t) {
        if (t instanceof StringType) {
            putString(dst, j, src.getUTF8String(i));
        } else if (t instanceof BinaryType) {
            dst.putByteArray(j, src.getBinary(i));
        } else if (t instanceof DecimalType) {
            DecimalType d = (DecimalType) t;
            dst.putDecimal(j, src.getDecimal(i, d.precision(), d.scale()), d.precision());
        } else if (t instanceof FloatType) {
            dst.putFloat(j, src.getFloat(i));
        } else if (t instanceof ShortType) {
            dst.putShort(j, src.getShort(i));
        } else if (t instanceof ByteType) {
            dst.putByte(j, src.getByte(i));
        } else if (t instanceof BooleanType) {
            dst.putBoolean(j, src.getBoolean(i));
        } else {
            throw new IllegalStateException("no copy for type " + t.simpleString());
        }
    }
}
