package io.dvengine.spark;

import org.apache.spark.TaskContext;
import org.apache.spark.sql.execution.vectorized.OffHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.util.TaskCompletionListener;

/**
 * Column vectors the reader fills itself (the marker column, the copies of surviving rows), of the
 * class Spark's generated code casts a Parquet scan's columns to: on- or off-heap, as
 * {@code spark.sql.columnVector.offheap.enabled} says. Off-heap memory is freed by {@code close()}
 * only, so an off-heap vector is closed when its task ends (closing it earlier as well is harmless).
 */
final class TaskVectors {
    private TaskVectors() {
    }

    static WritableColumnVector allocate(int capacity, DataType type, boolean offHeap) {
        if (!offHeap) {
            return new OnHeapColumnVector(capacity, type);
        }
        WritableColumnVector vector = new OffHeapColumnVector(capacity, type);
        TaskContext task = TaskContext.get();
        if (task != null) {
            task.addTaskCompletionListener(new TaskCompletionListener() {
                @Override
                public void onTaskCompletion(TaskContext context) {
                    vector.close();
                }
            });
        }
        return vector;
    }
}
