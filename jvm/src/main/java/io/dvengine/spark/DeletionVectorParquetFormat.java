package io.dvengine.spark;

import java.net.URI;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat$;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.SerializableConfiguration;
import scala.Function1;
import scala.reflect.ClassTag$;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Parquet with Delta deletion vectors applied inside the scan, the way Delta Spark's
 * DeltaParquetFileFormat does it: {@code spark.read.format("io.dvengine.spark.DeletionVectorParquetFormat")}.
 *
 * <p>Two modes. With {@value #DROP_DELETED_OPTION}{@code =true} (atomic columns only) the reader
 * leaves deleted rows out of its batches itself ({@link SurvivingRows}): nothing above the scan,
 * and files without a DV cost what a plain scan does. Otherwise the read schema must contain the
 * ByteType column {@value #IS_DELETED_COLUMN}; the reader fills it with 1 for rows the file's DV
 * deletes and 0 otherwise, and the caller filters on {@code = 0} (Delta Spark's way; every row of
 * every file then passes the filter). The DVs come in the {@value #DVS_OPTION} option (see
 * {@link DeletionVectorRef}); every file read must have an entry, so a path mismatch fails loudly
 * instead of reading deleted rows.
 *
 * <p>Row indexes are Spark's own {@code _tmp_metadata_row_index} column (what
 * {@code _metadata.row_index} uses), which the Parquet reader computes from row-group offsets, so
 * file splits and row-group skipping by pushed filters do not shift them.
 */
public class DeletionVectorParquetFormat extends ParquetFileFormat {
    private static final long serialVersionUID = 1L;

    public static final String IS_DELETED_COLUMN = "__dvengine_is_row_deleted";
    public static final String DVS_OPTION = "dvengine.dvs";
    /** "true": drop deleted rows inside the scan (no marker column, no filter); see {@link SurvivingRows}. */
    public static final String DROP_DELETED_OPTION = "dvengine.dropDeleted";

    @Override
    public String shortName() {
        return "dvengine-dv-parquet";
    }

    @Override
    public String toString() {
        return "DeletionVectorParquet(io.dvengine.spark.DeletionVectorParquetFormat)";
    }

    @Override
    public boolean equals(Object other) {
        return other != null && other.getClass() == getClass(); // the row-tracking subclass reads other columns
    }

    @Override
    public int hashCode() {
        return getClass().hashCode();
    }

    @Override
    public Function1<PartitionedFile, Iterator<InternalRow>> buildReaderWithPartitionValues(
            SparkSession sparkSession,
            StructType dataSchema,
            StructType partitionSchema,
            StructType requiredSchema,
            scala.collection.immutable.Seq<Filter> filters,
            scala.collection.immutable.Map<String, String> options,
            Configuration hadoopConf) {
        boolean drop = "true".equals(options.get(DROP_DELETED_OPTION).getOrElse(() -> "false"));
        int isDeleted = Arrays.asList(requiredSchema.fieldNames()).indexOf(IS_DELETED_COLUMN);
        if (drop) {
            if (isDeleted >= 0) {
                throw new IllegalArgumentException(DeletionVectorParquetFormat.class.getName() + " with " + DROP_DELETED_OPTION
                        + "=true takes no " + IS_DELETED_COLUMN + " column, got " + requiredSchema.simpleString());
            }
            if (!SurvivingRows.supports(requiredSchema) || !SurvivingRows.supports(partitionSchema)) {
                throw new IllegalArgumentException(DeletionVectorParquetFormat.class.getName() + " with " + DROP_DELETED_OPTION
                        + "=true needs atomic columns, got " + requiredSchema.simpleString() + " / " + partitionSchema.simpleString());
            }
        } else if (isDeleted < 0 || !requiredSchema.fields()[isDeleted].dataType().equals(DataTypes.ByteType)) {
            throw new IllegalArgumentException(DeletionVectorParquetFormat.class.getName()
                    + " needs the ByteType column " + IS_DELETED_COLUMN + " in the read schema, got " + requiredSchema.simpleString());
        }
        String rowIndexName = ParquetFileFormat$.MODULE$.ROW_INDEX_TEMPORARY_COLUMN_NAME();
        boolean wantsRowIndex = Arrays.asList(requiredSchema.fieldNames()).contains(rowIndexName);
        // The row-tracking layer reads the row index anyway and fills a requested one too.
        RowTrackingColumns tracking = RowTrackingColumns.requested(requiredSchema)
                || (fillsRowTracking() && (wantsRowIndex || FileConstants.requested(requiredSchema, options)))
                ? RowTrackingColumns.fromOptions(options)
                : null;
        if (wantsRowIndex && tracking == null) {
            throw new IllegalArgumentException(DeletionVectorParquetFormat.class.getName()
                    + " does not support selecting _metadata.row_index");
        }
        StructType withRowIndex = requiredSchema.add(new StructField(
                rowIndexName, DataTypes.LongType, true, org.apache.spark.sql.types.Metadata.empty()));
        // The is-deleted, row-tracking and per-file constant columns are not in the files: no Parquet filter on them
        // (nor on a _metadata field) may reach the reader.
        List<Filter> kept = new ArrayList<>();
        List<String> constants = FileConstants.names(options);
        for (Filter f : CollectionConverters.asJava(filters)) {
            if (Arrays.stream(f.references()).noneMatch(
                    r -> r.equals(IS_DELETED_COLUMN) || r.equals(rowIndexName) || r.startsWith("_metadata.")
                            || RowTrackingColumns.kind(r) >= 0 || constants.contains(r))) {
                kept.add(f);
            }
        }
        boolean offHeap = sparkSession.sessionState().conf().offHeapColumnVectorEnabled();
        scala.collection.immutable.Seq<Filter> pushed = CollectionConverters.asScala(kept).toSeq();
        Map<String, DeletionVectorRef> dvs = DeletionVectorRef.parseAll(
                options.get(DVS_OPTION).getOrElse(() -> null));
        // Up to three readers, each built only when a listed file may need it (each costs a
        // Hadoop-conf broadcast, ~11 ms measured): files without a DV skip the row index, which is
        // most of the format's cost; a file with a DV read whole counts its row indexes
        // (MarkDeletedRows), which needs every row of the file, so nothing is pushed into that
        // reader (Spark still applies the filters above the scan); a split covering part of a file
        // takes Spark's row index. Each gets its own copy of the Hadoop conf: the Parquet reader
        // writes its requested schema into the conf it is given and broadcasts that object.
        boolean anyWithDv = dvs.values().stream().anyMatch(ref -> !ref.noDeletionVector);
        boolean anyWithoutDv = dvs.values().stream().anyMatch(ref -> ref.noDeletionVector);
        boolean anyCountable = dvs.values().stream().anyMatch(ref -> !ref.noDeletionVector && ref.numRecords >= 0);
        Function1<PartitionedFile, Iterator<InternalRow>> withIndex = anyWithDv
                ? parquet(tracking, sparkSession, dataSchema, partitionSchema, withRowIndex, pushed, options, new Configuration(hadoopConf), offHeap)
                : null;
        Function1<PartitionedFile, Iterator<InternalRow>> withoutIndex = anyWithoutDv
                ? parquet(tracking, sparkSession, dataSchema, partitionSchema, requiredSchema, pushed, options, new Configuration(hadoopConf), offHeap)
                : null;
        Function1<PartitionedFile, Iterator<InternalRow>> wholeFile = null;
        if (anyCountable) {
            wholeFile = withoutIndex != null && kept.isEmpty()
                    ? withoutIndex
                    : parquet(tracking, sparkSession, dataSchema, partitionSchema, requiredSchema,
                            CollectionConverters.asScala(new ArrayList<Filter>()).toSeq(), options, new Configuration(hadoopConf), offHeap);
        }
        // Only DVs in files need the Hadoop conf on executors. It travels as a broadcast (fetched
        // once per executor), never inside the reader: serialized in the task closure, its ~110 KB
        // were deserialized by every task (measured ~7 ms a task, ~0.1 s a 20-file scan).
        boolean anyDvFile = dvs.values().stream().anyMatch(ref -> ref.dvFileUri != null);
        Broadcast<SerializableConfiguration> conf = anyDvFile
                ? sparkSession.sparkContext().broadcast(new SerializableConfiguration(hadoopConf),
                        ClassTag$.MODULE$.apply(SerializableConfiguration.class))
                : null;
        return new MarkDeletedRows(withIndex, withoutIndex, wholeFile, dvs, conf, requiredSchema, partitionSchema, drop ? -1 : isDeleted,
                offHeap);
    }

    /** Whether this format fills row-tracking metadata (and with it {@code _metadata.row_index}). */
    protected boolean fillsRowTracking() {
        return false;
    }

    /**
     * Spark's Parquet reader of {@code schema}; with row-tracking columns in it, one reading the
     * materialized columns and the row index instead, wrapped to compute them ({@link RowTrackingColumns}).
     */
    private Function1<PartitionedFile, Iterator<InternalRow>> parquet(RowTrackingColumns tracking, SparkSession sparkSession,
            StructType dataSchema, StructType partitionSchema, StructType schema, scala.collection.immutable.Seq<Filter> filters,
            scala.collection.immutable.Map<String, String> options, Configuration conf, boolean offHeap) {
        if (tracking == null) {
            return super.buildReaderWithPartitionValues(sparkSession, dataSchema, partitionSchema, schema, filters, options, conf);
        }
        Function1<PartitionedFile, Iterator<InternalRow>> inner = super.buildReaderWithPartitionValues(
                sparkSession, dataSchema, partitionSchema, tracking.innerSchema(schema), filters, options, conf);
        return tracking.wrap(inner, schema, partitionSchema, offHeap);
    }

    /** The key of the DV map for a file Spark reads. */
    static String fileKey(PartitionedFile file) {
        return normalize(file.toPath().toUri());
    }

    /**
     * One spelling per file: scheme, authority (if any) and the decoded path. Hadoop spells a
     * local file {@code file:///a%20b} or {@code file:/a%20b} depending on how it was built; both
     * are {@code file:/a b} here.
     */
    static String normalize(URI uri) {
        String authority = uri.getAuthority();
        return (uri.getScheme() == null ? "" : uri.getScheme() + ":")
                + (authority == null || authority.isEmpty() ? "" : "//" + authority)
                + uri.getPath();
    }
}
