package io.dvengine.spark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.expressions.FileSourceGeneratedMetadataStructField$;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@link DeletionVectorParquetFormat} for tables with row tracking enabled: also exposes Delta's
 * row-tracking metadata fields, {@code _metadata.row_id}, {@code _metadata.row_commit_version},
 * {@code _metadata.base_row_id} and {@code _metadata.default_row_commit_version}, with Delta Spark's
 * semantics (PROTOCOL.md "Row Tracking").
 *
 * <p>Spark asks a {@code FileFormat} for its metadata fields without options, so which fields exist
 * is a property of the class: the Python side reads row-tracking tables through this class and every
 * other table through its parent, where {@code _metadata.row_id} is Spark's "no such struct field"
 * at analysis, as in Delta (whose format declares these fields only when row tracking is enabled).
 *
 * <p>All four are Spark "generated" metadata fields (like {@code row_index}): Spark adds their
 * internal names to the schema the reader is asked for, and the reader fills them itself
 * ({@link RowTrackingColumns}) from the per-file {@code baseRowId} / {@code defaultRowCommitVersion}
 * the Python side passes in the {@value RowTrackingColumns#FILES_OPTION} option (the way DV
 * descriptors travel), the materialized columns it reads from the file by physical name, and
 * Spark's row index. Delta instead declares {@code base_row_id} / {@code default_row_commit_version}
 * as per-file constant fields filled from its own file index, and rewrites {@code row_id} into a
 * {@code coalesce} with a Catalyst rule; without Delta's file index or a session extension the
 * reader computing the coalesce is the way that needs neither.
 */
public class RowTrackingParquetFormat extends DeletionVectorParquetFormat {
    private static final long serialVersionUID = 1L;

    public static final String ROW_ID = "row_id";
    public static final String ROW_COMMIT_VERSION = "row_commit_version";
    public static final String BASE_ROW_ID = "base_row_id";
    public static final String DEFAULT_ROW_COMMIT_VERSION = "default_row_commit_version";

    /** Internal (reader) column name of a metadata field; Spark refuses a table column of that name. */
    static String internalName(String field) {
        return "_tmp_metadata_dvengine_" + field;
    }

    static final String[] FIELDS = {ROW_ID, ROW_COMMIT_VERSION, BASE_ROW_ID, DEFAULT_ROW_COMMIT_VERSION};

    @Override
    public Seq<StructField> metadataSchemaFields() {
        List<StructField> fields = new ArrayList<>(CollectionConverters.asJava(super.metadataSchemaFields()));
        for (String name : FIELDS) {
            // Not nullable, as Delta declares them: every live file of an enabled table has both ids.
            fields.add(FileSourceGeneratedMetadataStructField$.MODULE$.apply(name, internalName(name), DataTypes.LongType, false));
        }
        return CollectionConverters.asScala(fields).toSeq();
    }

    @Override
    protected boolean fillsRowTracking() {
        return true;
    }

    @Override
    public String shortName() {
        return "dvengine-row-tracking-parquet";
    }

    @Override
    public String toString() {
        return "RowTrackingParquet(io.dvengine.spark.RowTrackingParquetFormat)";
    }
}
