package io.dvengine.spark;

import java.io.Serializable;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructType;

/**
 * Per-file constant columns of a scan ({@value #OPTION}): partition values the Python side would
 * otherwise join to the scan from the log (files whose folders do not spell them, e.g. Delta's
 * random prefixes under column mapping), filled by {@link RowTrackingColumns} so that nothing but
 * projections and filters sits between the scan and {@code _metadata}.
 *
 * <p>Option text: first line the column names (tab-separated, as in the read schema); then one line
 * per file, its URI and one value per column, {@code n} for NULL or {@code v} + text
 * ({@link #internalValue}; written by {@code dv_format.constant_columns_option}).
 */
final class FileConstants implements Serializable {
    private static final long serialVersionUID = 1L;

    static final String OPTION = "dvengine.constantColumns";

    private final List<String> names;
    private final Map<String, String[]> values; // file key -> encoded values, by names

    private FileConstants(List<String> names, Map<String, String[]> values) {
        this.names = names;
        this.values = values;
    }

    /** The columns and per-file values of the option (none without it). */
    static FileConstants parse(scala.collection.immutable.Map<String, String> options) {
        Map<String, String[]> values = new HashMap<>();
        String text = options.get(OPTION).getOrElse(() -> null);
        if (text == null) {
            return new FileConstants(List.of(), values);
        }
        String[] lines = text.split("\n");
        List<String> names = Arrays.asList(lines[0].split("\t"));
        for (int i = 1; i < lines.length; i++) {
            String[] parts = lines[i].split("\t", -1);
            if (parts.length != names.size() + 1) {
                throw new IllegalArgumentException(OPTION + ": expected a uri and " + names.size() + " values, got " + lines[i]);
            }
            values.put(DeletionVectorParquetFormat.normalize(java.net.URI.create(parts[0])),
                    Arrays.copyOfRange(parts, 1, parts.length));
        }
        return new FileConstants(names, values);
    }

    List<String> names() {
        return names;
    }

    /** The encoded values of a file (by {@link #names}), or null when the option lists none for it. */
    String[] of(String fileKey) {
        return values.get(fileKey);
    }

    int fileCount() {
        return values.size();
    }

    /** The per-file constant columns these options name (none without {@value #OPTION}). */
    static List<String> names(scala.collection.immutable.Map<String, String> options) {
        String text = options.get(OPTION).getOrElse(() -> null);
        return text == null ? List.of() : Arrays.asList(text.split("\n", 2)[0].split("\t"));
    }

    /** Whether the requested schema has a per-file constant column of these options. */
    static boolean requested(StructType schema, scala.collection.immutable.Map<String, String> options) {
        List<String> names = names(options);
        return Arrays.stream(schema.fieldNames()).anyMatch(names::contains);
    }

    /** A constant's text ({@code v...}) as Spark's internal value of {@code type}; null for {@code n}. */
    static Object internalValue(String encoded, org.apache.spark.sql.types.DataType type) {
        if (encoded.equals("n")) {
            return null;
        }
        String text = encoded.substring(1);
        if (type instanceof org.apache.spark.sql.types.IntegerType || type instanceof org.apache.spark.sql.types.DateType) {
            return Integer.parseInt(text); // dates: days since the epoch
        } else if (type instanceof org.apache.spark.sql.types.LongType || type instanceof org.apache.spark.sql.types.TimestampType
                || type instanceof org.apache.spark.sql.types.TimestampNTZType) {
            return Long.parseLong(text); // timestamps: microseconds since the epoch
        } else if (type instanceof org.apache.spark.sql.types.ShortType) {
            return Short.parseShort(text);
        } else if (type instanceof org.apache.spark.sql.types.ByteType) {
            return Byte.parseByte(text);
        } else if (type instanceof org.apache.spark.sql.types.BooleanType) {
            return Boolean.parseBoolean(text);
        } else if (type instanceof org.apache.spark.sql.types.DoubleType) {
            return Double.parseDouble(text);
        } else if (type instanceof org.apache.spark.sql.types.FloatType) {
            return (float) Double.parseDouble(text);
        } else if (type instanceof org.apache.spark.sql.types.DecimalType) {
            org.apache.spark.sql.types.DecimalType d = (org.apache.spark.sql.types.DecimalType) type;
            return org.apache.spark.sql.types.Decimal.apply(new java.math.BigDecimal(text), d.precision(), d.scale());
        } else if (type instanceof org.apache.spark.sql.types.StringType) {
            return org.apache.spark.unsafe.types.UTF8String.fromBytes(java.util.Base64.getDecoder().decode(text));
        } else if (type instanceof org.apache.spark.sql.types.BinaryType) {
            return java.util.Base64.getDecoder().decode(text);
        }
        throw new IllegalArgumentException(OPTION + ": no constant columns of type " + type.simpleString());
    }

    /** Fills rows [0, n) of {@code out} with one internal value (null: NULL). */
    static void fill(WritableColumnVector out, Object value, int n, org.apache.spark.sql.types.DataType type) {
        for (int i = 0; i < n; i++) {
            if (value == null) {
                out.putNull(i);
            } else if (value instanceof Integer) {
                out.putInt(i, (Integer) value);
            } else if (value instanceof Long) {
                out.putLong(i, (Long) value);
            } else if (value instanceof Short) {
                out.putShort(i, (Short) value);
            } else if (value instanceof Byte) {
                out.putByte(i, (Byte) value);
            } else if (value instanceof Boolean) {
                out.putBoolean(i, (Boolean) value);
            } else if (value instanceof Double) {
                out.putDouble(i, (Double) value);
            } else if (value instanceof Float) {
                out.putFloat(i, (Float) value);
            } else if (value instanceof org.apache.spark.sql.types.Decimal) {
                out.putDecimal(i, (org.apache.spark.sql.types.Decimal) value,
                        ((org.apache.spark.sql.types.DecimalType) type).precision());
            } else if (value instanceof org.apache.spark.unsafe.types.UTF8String) {
                out.putByteArray(i, ((org.apache.spark.unsafe.types.UTF8String) value).getBytes());
            } else {
                out.putByteArray(i, (byte[]) value);
            }
        }
    }
}
