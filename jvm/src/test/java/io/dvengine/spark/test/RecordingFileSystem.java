package io.dvengine.spark.test;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.nio.charset.StandardCharsets;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Test-only Hadoop FileSystem: the local disk served under the {@code dvtest:} scheme, recording
 * every open, create, delete, listing and rename in a log folder, and refusing rename.
 *
 * <p>Register with {@code spark.hadoop.fs.dvtest.impl=io.dvengine.spark.test.RecordingFileSystem}
 * and name the log folder with {@code spark.hadoop.fs.dvtest.record.dir}. Each JVM (driver and
 * every executor) appends lines {@code op<TAB>path} to its own file there, so a test can assert
 * that every data and DV file Spark touched went through this FileSystem and that nothing was
 * renamed.
 */
public class RecordingFileSystem extends RawLocalFileSystem {
    public static final String SCHEME = "dvtest";
    public static final String RECORD_DIR_KEY = "fs.dvtest.record.dir";
    private static final URI NAME = URI.create(SCHEME + ":///");
    private static final Object LOCK = new Object();
    private String recordFile;

    @Override
    public void initialize(URI uri, Configuration conf) throws IOException {
        super.initialize(uri, conf);
        String dir = conf.get(RECORD_DIR_KEY);
        if (dir != null && !dir.isEmpty()) {
            new File(dir).mkdirs();
            recordFile = new File(dir, ManagementFactory.getRuntimeMXBean().getName().replace('@', '-') + ".log").getPath();
        }
    }

    @Override
    public URI getUri() {
        return NAME;
    }

    @Override
    public String getScheme() {
        return SCHEME;
    }

    private void record(String op, Path path) {
        if (recordFile == null) {
            return;
        }
        String line = op + "\t" + path.toUri().getPath() + "\n";
        synchronized (LOCK) {
            try (FileOutputStream out = new FileOutputStream(recordFile, true)) {
                out.write(line.getBytes(StandardCharsets.UTF_8));
            } catch (IOException e) {
                throw new IllegalStateException("cannot record to " + recordFile, e);
            }
        }
    }

    @Override
    public FSDataInputStream open(Path f, int bufferSize) throws IOException {
        record("open", f);
        return super.open(f, bufferSize);
    }

    // Every create (any overload, recursive or not) opens its stream through one of these two.
    @Override
    protected OutputStream createOutputStream(Path f, boolean append) throws IOException {
        record(append ? "append" : "create", f);
        return super.createOutputStream(f, append);
    }

    @Override
    protected OutputStream createOutputStreamWithMode(Path f, boolean append, FsPermission permission) throws IOException {
        record(append ? "append" : "create", f);
        return super.createOutputStreamWithMode(f, append, permission);
    }

    @Override
    public boolean delete(Path p, boolean recursive) throws IOException {
        record("delete", p);
        return super.delete(p, recursive);
    }

    @Override
    public FileStatus[] listStatus(Path f) throws FileNotFoundException, IOException {
        record("list", f);
        return super.listStatus(f);
    }

    @Override
    public boolean rename(Path src, Path dst) throws IOException {
        record("rename", src);
        throw new IOException("dvtest: rename of " + src + " to " + dst + " refused (dvengine must never rename)");
    }
}
