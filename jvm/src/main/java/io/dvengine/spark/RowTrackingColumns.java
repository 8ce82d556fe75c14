package io.dvengine.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat$;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import scala.Function1;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * Fills the row-tracking metadata columns ({@link RowTrackingParquetFormat}) under the Parquet
 * reader, so everything above it (DV marking or dropping, Spark's scan) sees them as ordinary
 * long columns of the requested schema.
 *
 * <p>For a requested schema with some of the four internal columns, the Parquet reader is asked
 * instead for the other requested columns, the two materialized columns (by physical name; NULL in
 * a file that lacks them) and Spark's row index (the physical position in the file, before any DV:
 * what {@code baseRowId} counts from). Each batch or row is then turned back into the requested
 * layout: {@code row_id = coalesce(materialized id, baseRowId + row index)},
 * {@code row_commit_version = coalesce(materialized version, defaultRowCommitVersion)}, the two
 * file constants as they are. Per-file values come in {@value #FILES_OPTION}, one line per file
 * ({@code uri \t baseRowId \t defaultRowCommitVersion}); a file read without a line fails the task.
 * The Parquet reader reads the materialized columns and the row index only when a row-tracking
 * field or {@code _metadata.row_index} is requested.
 *
 * <p>It also fills per-file constant columns ({@link FileConstants}): partition values of files
 * whose folders do not spell them, which the Python side would otherwise join to the scan (a join
 * hides {@code _metadata} from the plan above it).
 */
final class RowTrackingColumns implements Serializable {
    private static final long serialVersionUID = 1L;

    static final String FILES_OPTION = "dvengine.rowTracking.files";
    static final String ROW_ID_COLUMN_OPTION = "dvengine.rowTracking.rowIdColumn";
    static final String ROW_COMMIT_VERSION_COLUMN_OPTION = "dvengine.rowTracking.rowCommitVersionColumn";
    static final String TABLE_OPTION = "dvengine.table";
    private static final int CONSTANT_BASE = 100; // source code of constant column c: -(CONSTANT_BASE + c)

    private static final int ROW_ID = 0;
    private static final int ROW_COMMIT_VERSION = 1;
    private static final int BASE_ROW_ID = 2;
    private static final int DEFAULT_VERSION = 3;

    private final Map<String, long[]> files; // file key -> {baseRowId, defaultRowCommitVersion}
    private final String rowIdColumn;
    private final String rowCommitVersionColumn;
    private final String table;
    private final FileConstants constants;

    private RowTrackingColumns(Map<String, long[]> files, String rowIdColumn, String rowCommitVersionColumn, String table,
            FileConstants constants) {
        this.files = files;
        this.rowIdColumn = rowIdColumn;
        this.rowCommitVersionColumn = rowCommitVersionColumn;
        this.table = table;
        this.constants = constants;
    }

    /** Where a requested field comes from: -(kind + 1) for a row-tracking field, -(CONSTANT_BASE + c)
     * for constant c, 0 for the row index, 1 for a column the Parquet reader reads. */
    private int origin(String name) {
        int k = kind(name);
        if (k >= 0) {
            return -(k + 1);
        }
        int c = constants.names().indexOf(name);
        if (c >= 0) {
            return -(CONSTANT_BASE + c);
        }
        return isRowIndex(name) ? 0 : 1;
    }

    /** Whether the Parquet reader must give the materialized columns and the row index. */
    private boolean needsIds(StructType requested) {
        for (StructField f : requested.fields()) {
            int o = origin(f.name());
            if (o == 0 || (o < 0 && o > -CONSTANT_BASE)) {
                return true;
            }
        }
        return false;
    }

    /** Which generated column (ROW_ID..DEFAULT_VERSION) a requested field is, or -1. */
    static int kind(String name) {
        for (int k = 0; k < RowTrackingParquetFormat.FIELDS.length; k++) {
            if (RowTrackingParquetFormat.internalName(RowTrackingParquetFormat.FIELDS[k]).equals(name)) {
                return k;
            }
        }
        return -1;
    }

    /** Whether the schema asks for any row-tracking column. */
    static boolean requested(StructType schema) {
        return Arrays.stream(schema.fieldNames()).anyMatch(n -> kind(n) >= 0);
    }

    /** The reader's settings from the scan options; IllegalArgumentException naming what is missing. */
    static RowTrackingColumns fromOptions(scala.collection.immutable.Map<String, String> options) {
        String table = options.get(TABLE_OPTION).getOrElse(() -> "(unnamed table)");
        String lines = options.get(FILES_OPTION).getOrElse(() -> null);
        String rowId = options.get(ROW_ID_COLUMN_OPTION).getOrElse(() -> null);
        String version = options.get(ROW_COMMIT_VERSION_COLUMN_OPTION).getOrElse(() -> null);
        if (lines == null || rowId == null || version == null) {
            throw new IllegalArgumentException("_metadata.row_id / row_commit_version of " + table
                    + " need row tracking enabled (delta.enableRowTracking=true): the scan has no " + FILES_OPTION + ", "
                    + ROW_ID_COLUMN_OPTION + " and " + ROW_COMMIT_VERSION_COLUMN_OPTION + " options");
        }
        Map<String, long[]> files = new HashMap<>();
        for (String line : lines.split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            String[] parts = line.split("\t");
            if (parts.length != 3) {
                throw new IllegalArgumentException(FILES_OPTION + ": expected uri, baseRowId, defaultRowCommitVersion, got " + line);
            }
            String key = DeletionVectorParquetFormat.normalize(java.net.URI.create(parts[0]));
            files.put(key, new long[] {Long.parseLong(parts[1]), Long.parseLong(parts[2])});
        }
        return new RowTrackingColumns(files, rowId, version, table, FileConstants.parse(options));
    }

    /**
     * The schema to ask the Parquet reader for instead of {@code requested}: its other columns in
     * order, then the materialized id and version columns, then Spark's row index unless
     * {@code requested} already ends with it.
     */
    StructType innerSchema(StructType requested) {
        List<StructField> fields = new ArrayList<>();
        for (StructField f : requested.fields()) {
            if (origin(f.name()) == 1) {
                fields.add(f);
            }
        }
        if (needsIds(requested)) {
            fields.add(new StructField(rowIdColumn, DataTypes.LongType, true, Metadata.empty()));
            fields.add(new StructField(rowCommitVersionColumn, DataTypes.LongType, true, Metadata.empty()));
            fields.add(new StructField(rowIndexName(), DataTypes.LongType, true, Metadata.empty()));
        }
        return new StructType(fields.toArray(new StructField[0]));
    }

    private static String rowIndexName() {
        return ParquetFileFormat$.MODULE$.ROW_INDEX_TEMPORARY_COLUMN_NAME();
    }

    private static boolean isRowIndex(String name) {
        return rowIndexName().equals(name);
    }

    /** A reader giving {@code requested} (+ partition columns) from one reading {@link #innerSchema}. */
    Function1<PartitionedFile, Iterator<InternalRow>> wrap(Function1<PartitionedFile, Iterator<InternalRow>> inner,
            StructType requested, StructType partitionSchema, boolean offHeap) {
        int n = requested.length();
        int[] source = new int[n]; // >= 0: inner column; -(kind + 1): row-tracking field; -(CONSTANT_BASE + c): constant
        int next = 0;
        int innerLength = 0;
        for (StructField f : requested.fields()) {
            if (origin(f.name()) == 1) {
                innerLength++;
            }
        }
        boolean ids = needsIds(requested);
        int materializedId = ids ? innerLength : -1;
        int materializedVersion = ids ? innerLength + 1 : -1;
        int rowIndex = ids ? innerLength + 2 : -1;
        for (int j = 0; j < n; j++) {
            int o = origin(requested.fields()[j].name());
            source[j] = o == 1 ? next++ : o == 0 ? rowIndex : o;
        }
        return new Reader(inner, source, materializedId, materializedVersion, rowIndex, ids ? innerLength + 3 : innerLength,
                partitionSchema, requested, offHeap);
    }

    /** The per-file reader (serialized to executors with the settings it captures). */
    private final class Reader extends AbstractFunction1<PartitionedFile, Iterator<InternalRow>> implements Serializable {
        private static final long serialVersionUID = 1L;
        private final Function1<PartitionedFile, Iterator<InternalRow>> inner;
        private final int[] source;
        private final int materializedId;
        private final int materializedVersion;
        private final int rowIndex;
        private final int innerWidth;
        private final StructType partitionSchema;
        private final StructType requested;
        private final boolean offHeap;

        Reader(Function1<PartitionedFile, Iterator<InternalRow>> inner, int[] source, int materializedId,
               int materializedVersion, int rowIndex, int innerWidth, StructType partitionSchema, StructType requested,
               boolean offHeap) {
            this.inner = inner;
            this.source = source;
            this.materializedId = materializedId;
            this.materializedVersion = materializedVersion;
            this.rowIndex = rowIndex;
            this.innerWidth = innerWidth;
            this.partitionSchema = partitionSchema;
            this.requested = requested;
            this.offHeap = offHeap;
        }

        @Override
        public Iterator<InternalRow> apply(PartitionedFile file) {
            String key = DeletionVectorParquetFormat.fileKey(file);
            long[] ids = files.get(key);
            if (ids == null && materializedId >= 0) {
                throw new DeletionVectorException("data file " + key + " of " + table + " is read with _metadata.row_id but "
                        + FILES_OPTION + " has no baseRowId / defaultRowCommitVersion for it (" + files.size() + " files listed)");
            }
            @SuppressWarnings("unchecked")
            Iterator<Object> rows = (Iterator<Object>) (Iterator<?>) inner.apply(file);
            @SuppressWarnings("unchecked")
            Iterator<InternalRow> out = (Iterator<InternalRow>) (Iterator<?>) new Filling(rows,
                    ids == null ? 0 : ids[0], ids == null ? 0 : ids[1], constantValues(key));
            return out;
        }

        /** The file's constant columns as Spark internal values, by constant index. */
        private Object[] constantValues(String key) {
            Object[] values = new Object[constants.names().size()];
            if (values.length == 0) {
                return values;
            }
            String[] encoded = constants.of(key);
            for (int j = 0; j < source.length; j++) {
                int c = -source[j] - CONSTANT_BASE;
                if (c >= 0) {
                    if (encoded == null) {
                        throw new DeletionVectorException("data file " + key + " of " + table + " has no entry in "
                                + FileConstants.OPTION + " (" + constants.fileCount() + " files listed)");
                    }
                    values[c] = FileConstants.internalValue(encoded[c], requested.fields()[j].dataType());
                }
            }
            return values;
        }

        /** Turns one file's batches or rows into the requested layout. */
        private final class Filling extends AbstractIterator<Object> {
            private final Iterator<Object> in;
            private final long base;
            private final long defaultVersion;
            private final Object[] constantValues;
            private final WritableColumnVector[] computed = new WritableColumnVector[4];
            private final WritableColumnVector[] constantVectors;
            private int capacity;
            private UnsafeProjection projection;
            private final GenericInternalRow values;
            private final JoinedRow joined = new JoinedRow();

            Filling(Iterator<Object> in, long base, long defaultVersion, Object[] constantValues) {
                this.in = in;
                this.base = base;
                this.defaultVersion = defaultVersion;
                this.constantValues = constantValues;
                this.constantVectors = new WritableColumnVector[constantValues.length];
                this.values = new GenericInternalRow(4 + constantValues.length);
                for (int c = 0; c < constantValues.length; c++) {
                    values.update(4 + c, constantValues[c]);
                }
            }

            @Override
            public boolean hasNext() {
                return in.hasNext();
            }

            @Override
            public Object next() {
                Object next = in.next();
                return next instanceof ColumnarBatch ? batch((ColumnarBatch) next) : row((InternalRow) next);
            }

            private ColumnarBatch batch(ColumnarBatch batch) {
                int n = batch.numRows();
                if (capacity < n) {
                    for (WritableColumnVector[] vectors : List.of(computed, constantVectors)) {
                        for (int k = 0; k < vectors.length; k++) {
                            if (vectors[k] != null) {
                                vectors[k].close();
                                vectors[k] = null;
                            }
                        }
                    }
                    capacity = Math.max(n, 4096);
                }
                ColumnVector id = materializedId < 0 ? null : batch.column(materializedId);
                ColumnVector version = materializedId < 0 ? null : batch.column(materializedVersion);
                ColumnVector index = materializedId < 0 ? null : batch.column(rowIndex);
                ColumnVector[] columns = new ColumnVector[source.length + partitionSchema.length()];
                for (int j = 0; j < source.length; j++) {
                    if (source[j] >= 0) {
                        columns[j] = batch.column(source[j]);
                        continue;
                    }
                    int c = -source[j] - CONSTANT_BASE;
                    if (c >= 0) { // the same value in every row of the file: filled once per vector
                        if (constantVectors[c] == null) {
                            org.apache.spark.sql.types.DataType type = requested.fields()[j].dataType();
                            constantVectors[c] = TaskVectors.allocate(capacity, type, offHeap);
                            FileConstants.fill(constantVectors[c], constantValues[c], capacity, type);
                        }
                        columns[j] = constantVectors[c];
                        continue;
                    }
                    int k = -source[j] - 1;
                    if (computed[k] == null) {
                        computed[k] = TaskVectors.allocate(capacity, DataTypes.LongType, offHeap);
                    }
                    WritableColumnVector out = computed[k];
                    out.reset();
                    if (k == BASE_ROW_ID || k == DEFAULT_VERSION) {
                        out.putLongs(0, n, k == BASE_ROW_ID ? base : defaultVersion);
                    } else {
                        for (int i = 0; i < n; i++) {
                            out.putLong(i, valueAt(k, id, version, index, i));
                        }
                    }
                    columns[j] = out;
                }
                for (int p = 0; p < partitionSchema.length(); p++) {
                    columns[source.length + p] = batch.column(innerWidth + p);
                }
                return new ColumnarBatch(columns, n);
            }

            private long valueAt(int k, ColumnVector id, ColumnVector version, ColumnVector index, int i) {
                switch (k) {
                    case ROW_ID:
                        return id.isNullAt(i) ? base + index.getLong(i) : id.getLong(i);
                    case ROW_COMMIT_VERSION:
                        return version.isNullAt(i) ? defaultVersion : version.getLong(i);
                    case BASE_ROW_ID:
                        return base;
                    default:
                        return defaultVersion;
                }
            }

            /** Rows (schemas Parquet cannot read into batches): one projection per task over (row, computed values). */
            private InternalRow row(InternalRow row) {
                if (materializedId >= 0) {
                    values.setLong(ROW_ID, row.isNullAt(materializedId) ? base + row.getLong(rowIndex) : row.getLong(materializedId));
                    values.setLong(ROW_COMMIT_VERSION,
                            row.isNullAt(materializedVersion) ? defaultVersion : row.getLong(materializedVersion));
                }
                values.setLong(BASE_ROW_ID, base);
                values.setLong(DEFAULT_VERSION, defaultVersion);
                if (projection == null) {
                    projection = rowProjection();
                }
                return projection.apply(joined.apply(row, values));
            }

            private UnsafeProjection rowProjection() {
                // Joined row layout: inner columns, partition columns, then the 4 computed values.
                int width = innerWidth + partitionSchema.length();
                List<Expression> exprs = new ArrayList<>();
                for (int j = 0; j < source.length; j++) {
                    StructField f = requested.fields()[j];
                    int c = -source[j] - CONSTANT_BASE;
                    int at = source[j] >= 0 ? source[j] : c >= 0 ? width + 4 + c : width + (-source[j] - 1);
                    exprs.add(new BoundReference(at, f.dataType(), true));
                }
                for (int p = 0; p < partitionSchema.length(); p++) {
                    StructField f = partitionSchema.fields()[p];
                    exprs.add(new BoundReference(innerWidth + p, f.dataType(), f.nullable()));
                }
                return UnsafeProjection.create(CollectionConverters.asScala(exprs).toSeq());
            }
        }
    }
}
