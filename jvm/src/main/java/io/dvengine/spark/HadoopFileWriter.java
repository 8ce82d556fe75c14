package io.dvengine.spark;

import java.io.IOException;
import java.io.UncheckedIOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.util.SerializableConfiguration;

import scala.reflect.ClassTag$;

/**
 * A SQL function {@code dvengine_write_file(path, bytes)} that writes one whole file through
 * Hadoop's FileSystem on the executor and returns its length.
 *
 * <p>dvengine's Python tasks (DV files, data files of UPDATE and MERGE) encode their files in
 * memory and hand the bytes back to the JVM as rows; this function writes them, so every byte
 * reaches the table through the same FileSystem (s3a, abfss, gs, hdfs ...) and the same Hadoop
 * settings as Spark's own reads, whatever scheme the table has. The session's Hadoop
 * configuration is broadcast when the function is registered (once per command).
 */
public final class HadoopFileWriter implements UDF2<String, byte[], Long> {
    private static final long serialVersionUID = 1L;
    public static final String NAME = "dvengine_write_file";

    private final Broadcast<SerializableConfiguration> conf;

    private HadoopFileWriter(Broadcast<SerializableConfiguration> conf) {
        this.conf = conf;
    }

    /** Register the function in {@code spark} with the session's current Hadoop configuration. */
    public static void register(SparkSession spark) {
        Configuration hadoopConf = spark.sessionState().newHadoopConf();
        Broadcast<SerializableConfiguration> conf = spark.sparkContext().broadcast(
                new SerializableConfiguration(hadoopConf), ClassTag$.MODULE$.apply(SerializableConfiguration.class));
        UserDefinedFunction udf = functions.udf(new HadoopFileWriter(conf), DataTypes.LongType).asNondeterministic();
        spark.udf().register(NAME, udf);
    }

    @Override
    public Long call(String file, byte[] data) {
        if (file == null || data == null) {
            return null;
        }
        Path path = new Path(file);
        try {
            FileSystem fs = path.getFileSystem(conf.value().value());
            // overwrite: a retried task rewrites its own pre-assigned DV file name
            try (FSDataOutputStream out = fs.create(path, true)) {
                out.write(data);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("dvengine could not write " + file + ": " + e.getMessage(), e);
        }
        return (long) data.length;
    }
}
