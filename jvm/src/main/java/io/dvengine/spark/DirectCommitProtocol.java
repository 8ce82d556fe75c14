package io.dvengine.spark;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.spark.internal.io.FileCommitProtocol;
import org.apache.spark.internal.io.FileNameSpec;

import scala.Option;
import scala.collection.immutable.Seq;

/**
 * A commit protocol for Spark's file writers that writes every file under its final, unique name
 * directly in the table (or partition) folder: no {@code _temporary} folder, no rename at task or
 * job commit. Renames are neither atomic nor cheap on object stores, and Delta needs none: a file
 * becomes part of the table only when a commit names it (Delta Spark's DelayedCommitProtocol does
 * the same).
 *
 * <p>File names carry the write id the driver passes as the writer option {@code dvengine.write.id}
 * (it reaches the job's Hadoop configuration), so a failed command can find and delete whatever
 * any task attempt wrote. A failed task attempt deletes its own files ({@link #abortTask}). The
 * driver takes the committed files of a write with {@link #takeCommitted}.
 */
public final class DirectCommitProtocol extends FileCommitProtocol implements Serializable {
    private static final long serialVersionUID = 1L;
    public static final String WRITE_ID_KEY = "dvengine.write.id";
    /** Committed files per write id, filled on the driver by commitJob. */
    private static final Map<String, List<String>> COMMITTED = new ConcurrentHashMap<>();

    private final String jobId;
    private final String path;
    private transient List<String> taskFiles;

    public DirectCommitProtocol(String jobId, String path, boolean dynamicPartitionOverwrite) {
        if (dynamicPartitionOverwrite) {
            throw new UnsupportedOperationException("dvengine's direct commit protocol does not overwrite partitions");
        }
        this.jobId = jobId;
        this.path = path;
    }

    public DirectCommitProtocol(String jobId, String path) {
        this(jobId, path, false);
    }

    /** The files committed by the write {@code writeId} (absolute Hadoop paths), forgotten once taken. */
    public static String[] takeCommitted(String writeId) {
        List<String> files = COMMITTED.remove(writeId);
        return files == null ? new String[0] : files.toArray(new String[0]);
    }

    private static String writeId(TaskAttemptContext context, String fallback) {
        String id = context.getConfiguration().get(WRITE_ID_KEY);
        return id == null || id.isEmpty() ? fallback : id;
    }

    @Override
    public void setupJob(JobContext jobContext) {
        // nothing to prepare: files go straight to their final place
    }

    @Override
    public void commitJob(JobContext jobContext, Seq<FileCommitProtocol.TaskCommitMessage> taskCommits) {
        String id = jobContext.getConfiguration().get(WRITE_ID_KEY);
        List<String> all = new ArrayList<>();
        scala.collection.Iterator<FileCommitProtocol.TaskCommitMessage> it = taskCommits.iterator();
        while (it.hasNext()) {
            for (String file : (String[]) it.next().obj()) {
                all.add(file);
            }
        }
        COMMITTED.put(id == null ? jobId : id, all);
    }

    @Override
    public void abortJob(JobContext jobContext) {
        // the driver deletes what this write left (names carry its write id)
    }

    @Override
    public void setupTask(TaskAttemptContext taskContext) {
        taskFiles = new ArrayList<>();
    }

    @Override
    public String newTaskTempFile(TaskAttemptContext taskContext, Option<String> dir, String ext) {
        return newTaskTempFile(taskContext, dir, new FileNameSpec("", ext));
    }

    @Override
    public String newTaskTempFile(TaskAttemptContext taskContext, Option<String> dir, FileNameSpec spec) {
        int split = taskContext.getTaskAttemptID().getTaskID().getId();
        String name = String.format("%spart-%05d-%s-%s%s", spec.prefix(), split, writeId(taskContext, jobId),
                UUID.randomUUID(), spec.suffix());
        Path folder = dir.isDefined() ? new Path(path, dir.get()) : new Path(path);
        String file = new Path(folder, name).toString();
        if (taskFiles == null) {
            taskFiles = new ArrayList<>();
        }
        taskFiles.add(file);
        return file;
    }

    @Override
    public String newTaskTempFileAbsPath(TaskAttemptContext taskContext, String absoluteDir, String ext) {
        throw new UnsupportedOperationException("dvengine writes no files outside the table folder");
    }

    @Override
    public FileCommitProtocol.TaskCommitMessage commitTask(TaskAttemptContext taskContext) {
        String[] files = taskFiles == null ? new String[0] : taskFiles.toArray(new String[0]);
        taskFiles = null;
        return new FileCommitProtocol.TaskCommitMessage(files);
    }

    @Override
    public void abortTask(TaskAttemptContext taskContext) {
        if (taskFiles == null) {
            return;
        }
        for (String file : taskFiles) {
            try {
                Path p = new Path(file);
                FileSystem fs = p.getFileSystem(taskContext.getConfiguration());
                fs.delete(p, false);
            } catch (IOException e) {
                // left for the driver's clean-up by write id, or VACUUM
            }
        }
        taskFiles = null;
    }
}
