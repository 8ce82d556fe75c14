package io.dvengine.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.util.SerializableConfiguration;
import scala.Function1;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * The per-file reader shipped to executors: runs the Parquet reader, loads the file's DV and turns
 * each batch or row into the requested layout with {@value DeletionVectorParquetFormat#IS_DELETED_COLUMN} set.
 *
 * <p>Row indexes come one of two ways. A task that reads a file with a DV whole (the usual case:
 * files up to the split size are one split) counts them: with no filter pushed into that reader,
 * Parquet returns every row of the file in file order, so the k-th row returned is row k; the
 * count is checked against the log's {@code numRecords} before the task can succeed. Spark's own
 * row index column ({@code _tmp_metadata_row_index}, placed right after the required columns) is
 * used for a split that covers part of a file, or when the log has no row count: it costs about a
 * sixth of a plain scan (Spark fills it from a boxed iterator, one call per row), which counting
 * avoids.
 *
 * <p>Columnar batches keep the Parquet reader's vectors (no copy) with the is-deleted vector
 * replaced by one this reader fills; rows (non-vectorizable schemas) that are deleted are
 * dropped here, and the survivors are projected without the row index and with a 0 marker.
 *
 * <p>A file listed without a DV is read by the second reader, which produces no row index
 * (computing it costs about a tenth of a plain scan); its batches get one all-zero marker
 * vector, filled once per task.
 *
 * <p>In drop mode (no marker column, {@code isDeleted == -1}) a batch that loses rows is copied
 * without them ({@link SurvivingRows}), one that loses all is skipped, one that loses none and
 * every batch of a file without a DV pass through untouched.
 */
final class MarkDeletedRows extends AbstractFunction1<PartitionedFile, Iterator<InternalRow>> implements Serializable {
    private static final long serialVersionUID = 1L;

    // A reader is null when no listed file needs it (every file has a DV, or none has).
    private final Function1<PartitionedFile, Iterator<InternalRow>> parquet; // with Spark's row index
    private final Function1<PartitionedFile, Iterator<InternalRow>> parquetWithoutIndex;
    private final Function1<PartitionedFile, Iterator<InternalRow>> parquetWholeFile; // no index, nothing pushed
    private final Map<String, DeletionVectorRef> dvs;
    private final Broadcast<SerializableConfiguration> conf; // null when no DV lives in a file
    private final StructType requiredSchema;
    private final StructType partitionSchema;
    private final int isDeleted; // -1: drop mode, deleted rows are left out of the output (SurvivingRows)
    private final boolean offHeap; // the vector class Spark's generated code casts a Parquet scan's columns to

    MarkDeletedRows(Function1<PartitionedFile, Iterator<InternalRow>> parquet,
                    Function1<PartitionedFile, Iterator<InternalRow>> parquetWithoutIndex,
                    Function1<PartitionedFile, Iterator<InternalRow>> parquetWholeFile, Map<String, DeletionVectorRef> dvs,
                    Broadcast<SerializableConfiguration> conf, StructType requiredSchema, StructType partitionSchema, int isDeleted,
                    boolean offHeap) {
        this.parquet = parquet;
        this.parquetWithoutIndex = parquetWithoutIndex;
        this.parquetWholeFile = parquetWholeFile;
        this.dvs = dvs;
        this.conf = conf;
        this.requiredSchema = requiredSchema;
        this.partitionSchema = partitionSchema;
        this.isDeleted = isDeleted;
        this.offHeap = offHeap;
    }

    @Override
    public Iterator<InternalRow> apply(PartitionedFile file) {
        String key = DeletionVectorParquetFormat.fileKey(file);
        DeletionVectorRef ref = dvs.get(key);
        if (ref == null) {
            throw new DeletionVectorException("data file " + key + " is read through "
                    + DeletionVectorParquetFormat.class.getName() + " but " + DeletionVectorParquetFormat.DVS_OPTION
                    + " has no deletion vector for it (" + dvs.size() + " files listed)");
        }
        if (ref.noDeletionVector && isDeleted < 0) {
            return parquetWithoutIndex.apply(file); // drop mode: nothing to drop, nothing to add
        }
        if (ref.noDeletionVector) {
            @SuppressWarnings("unchecked")
            Iterator<Object> rows = (Iterator<Object>) (Iterator<?>) parquetWithoutIndex.apply(file);
            @SuppressWarnings("unchecked")
            Iterator<InternalRow> out = (Iterator<InternalRow>) (Iterator<?>) new NothingDeleted(rows);
            return out;
        }
        RowIndexBitmap bitmap = RowIndexBitmap.load(ref, ref.dvFileUri == null ? null : conf.value().value());
        boolean counted = countsRowIndexes(file, ref);
        // Spark erases batches to InternalRow (the scan casts them back): keep elements as Object.
        @SuppressWarnings("unchecked")
        Iterator<Object> rows = (Iterator<Object>) (Iterator<?>) (counted ? parquetWholeFile : parquet).apply(file);
        @SuppressWarnings("unchecked")
        Iterator<InternalRow> out = (Iterator<InternalRow>) (Iterator<?>) (counted
                ? new Marking(rows, bitmap, -1, ref.numRecords, key)
                : new Marking(rows, bitmap, requiredSchema.length(), -1, key));
        return out;
    }

    /**
     * Whether this task's rows of {@code file} get their row indexes by counting: it reads the
     * whole file (a split from 0 to a known size) and the log gives the file's row count to check.
     */
    private boolean countsRowIndexes(PartitionedFile file, DeletionVectorRef ref) {
        return parquetWholeFile != null && ref.numRecords >= 0 && file.start() == 0 && file.fileSize() > 0
                && file.length() == file.fileSize();
    }

    /** The projection of a row to the output layout: {@code rowIndex} (-1: none) left out, marker 0. */
    private UnsafeProjection rowProjection(int rowIndex) {
        List<Expression> exprs = new ArrayList<>();
        List<StructField> inputs = new ArrayList<>();
        for (StructField f : requiredSchema.fields()) {
            inputs.add(f);
        }
        if (rowIndex >= 0) {
            inputs.add(new StructField("row_index", DataTypes.LongType, true, org.apache.spark.sql.types.Metadata.empty()));
        }
        for (StructField f : partitionSchema.fields()) {
            inputs.add(f);
        }
        for (int i = 0; i < inputs.size(); i++) {
            if (i == rowIndex) {
                continue;
            }
            if (i == isDeleted) {
                exprs.add(Literal.create((byte) 0, DataTypes.ByteType));
            } else {
                exprs.add(new BoundReference(i, inputs.get(i).dataType(), inputs.get(i).nullable()));
            }
        }
        return UnsafeProjection.create(CollectionConverters.asScala(exprs).toSeq());
    }

    /** The types of the required (data) columns, which drop mode copies. */
    private org.apache.spark.sql.types.DataType[] dataTypes() {
        List<org.apache.spark.sql.types.DataType> types = new ArrayList<>();
        for (StructField f : requiredSchema.fields()) {
            types.add(f.dataType());
        }
        return types.toArray(new org.apache.spark.sql.types.DataType[0]);
    }

    /** A byte vector of the class the scan's generated code expects (marker mode's marker column). */
    private WritableColumnVector byteVector(int capacity) {
        return TaskVectors.allocate(capacity, DataTypes.ByteType, offHeap);
    }

    /** Wraps one file's Parquet iterator; objects are ColumnarBatch or InternalRow as Spark erases them. */
    private final class Marking extends AbstractIterator<Object> {
        private final Iterator<Object> in;
        private final RowIndexBitmap bitmap;
        private final int rowIndex; // position of Spark's row index column; -1: counted
        private final long fileRows; // counted: the log's numRecords, which the count must reach
        private final String fileKey;
        private long nextRowIndex; // counted: the row index of the next row Parquet returns
        private WritableColumnVector marks;
        private int capacity;
        private UnsafeProjection projection;
        private Object pendingRow;
        private SurvivingRows survivors;

        Marking(Iterator<Object> in, RowIndexBitmap bitmap, int rowIndex, long fileRows, String fileKey) {
            this.in = in;
            this.bitmap = bitmap;
            this.rowIndex = rowIndex;
            this.fileRows = fileRows;
            this.fileKey = fileKey;
        }

        @Override
        public boolean hasNext() {
            while (pendingRow == null && in.hasNext()) {
                Object next = in.next();
                if (next instanceof ColumnarBatch) {
                    pendingRow = markBatch((ColumnarBatch) next);
                } else {
                    InternalRow row = (InternalRow) next;
                    if (!bitmap.contains(rowIndex < 0 ? count(1) : row.getLong(rowIndex))) {
                        if (projection == null) {
                            projection = rowProjection(rowIndex);
                        }
                        pendingRow = projection.apply(row);
                    }
                }
            }
            if (pendingRow == null && rowIndex < 0 && nextRowIndex != fileRows) {
                throw countMismatch(nextRowIndex);
            }
            return pendingRow != null;
        }

        @Override
        public Object next() {
            if (!hasNext()) {
                throw new java.util.NoSuchElementException();
            }
            Object out = pendingRow;
            pendingRow = null;
            return out;
        }

        /** Counted mode: the row index of the first of the next {@code n} rows. */
        private long count(int n) {
            long first = nextRowIndex;
            nextRowIndex += n;
            if (nextRowIndex > fileRows) {
                throw countMismatch(nextRowIndex);
            }
            return first;
        }

        /** The file does not hold the rows the log says: its DV's row indexes cannot be applied. */
        private DeletionVectorException countMismatch(long read) {
            String got = read > fileRows ? "more than " + fileRows : String.valueOf(read);
            return new DeletionVectorException("data file " + fileKey + ": Parquet returned " + got
                    + " rows but the log says numRecords=" + fileRows + "; its deletion vector's row indexes cannot be applied");
        }

        private ColumnarBatch markBatch(ColumnarBatch batch) {
            int n = batch.numRows();
            if (marks == null || capacity < n) {
                if (marks != null) {
                    marks.close();
                }
                capacity = Math.max(n, 4096);
                marks = byteVector(capacity);
            }
            int deleted = rowIndex < 0 ? bitmap.markRange(count(n), n, marks) : bitmap.mark(batch.column(rowIndex), n, marks);
            ColumnVector[] columns = new ColumnVector[rowIndex < 0 ? batch.numCols() : batch.numCols() - 1];
            for (int i = 0, j = 0; i < batch.numCols(); i++) {
                if (i == rowIndex) {
                    continue;
                }
                columns[j++] = i == isDeleted ? marks : batch.column(i);
            }
            if (isDeleted >= 0 || deleted == 0) {
                return new ColumnarBatch(columns, n);
            }
            if (deleted == n) {
                return null; // nothing survives: hasNext() goes on to the next batch
            }
            if (survivors == null) {
                survivors = new SurvivingRows(dataTypes(), offHeap);
            }
            return survivors.keep(columns, n, marks, n - deleted);
        }
    }

    /** A file without a DV: batches pass through with the marker vector swapped for zeros, rows are projected. */
    private final class NothingDeleted extends AbstractIterator<Object> {
        private final Iterator<Object> in;
        private WritableColumnVector zeros;
        private int zerosCapacity;
        private UnsafeProjection projection;

        NothingDeleted(Iterator<Object> in) {
            this.in = in;
        }

        @Override
        public boolean hasNext() {
            return in.hasNext();
        }

        @Override
        public Object next() {
            Object next = in.next();
            if (next instanceof ColumnarBatch) {
                ColumnarBatch batch = (ColumnarBatch) next;
                int n = batch.numRows();
                if (zeros == null || zerosCapacity < n) {
                    if (zeros != null) {
                        zeros.close();
                    }
                    zerosCapacity = Math.max(n, 4096);
                    zeros = byteVector(zerosCapacity);
                    zeros.putBytes(0, zerosCapacity, (byte) 0);
                }
                ColumnVector[] columns = new ColumnVector[batch.numCols()];
                for (int i = 0; i < columns.length; i++) {
                    columns[i] = i == isDeleted ? zeros : batch.column(i);
                }
                return new ColumnarBatch(columns, n);
            }
            if (projection == null) {
                projection = rowProjection(-1);
            }
            return projection.apply((InternalRow) next);
        }
    }
}
