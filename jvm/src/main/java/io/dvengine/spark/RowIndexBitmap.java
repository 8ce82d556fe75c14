package io.dvengine.spark;

import java.io.EOFException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.zip.CRC32;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.roaringbitmap.PeekableIntIterator;
import org.roaringbitmap.RoaringBitmap;

/**
 * The deleted row indexes of one data file, decoded on the executor from Delta's
 * RoaringBitmapArray format (magic 1681511377 LE, u64 LE bucket count, per bucket a u32 LE high
 * key and a portable 32-bit RoaringBitmap of the low halves).
 *
 * <p>Every step is validated (version byte, size field, CRC-32, magic, keys, cardinality, row
 * bound) because a wrong DV silently resurrects or hides rows; a failure is a
 * {@link DeletionVectorException} naming the DV and the data file.
 */
final class RowIndexBitmap {
    static final int MAGIC = 1681511377;
    /** High keys above this would make the bucket array absurd; no Parquet file has 2^52 rows. */
    private static final int MAX_HIGH_KEY = 1 << 20;

    private final RoaringBitmap[] byHigh; // index = high 32 bits of the row index

    private RowIndexBitmap(RoaringBitmap[] byHigh) {
        this.byHigh = byHigh;
    }

    static RowIndexBitmap load(DeletionVectorRef ref, Configuration conf) {
        if (ref.noDeletionVector) {
            return new RowIndexBitmap(new RoaringBitmap[0]); // a file without a DV: nothing deleted
        }
        byte[] serialized = ref.inline != null ? ref.inline : readFrame(ref, conf);
        return decode(serialized, ref);
    }

    private static byte[] readFrame(DeletionVectorRef ref, Configuration conf) {
        if (ref.offset < 1 || ref.sizeInBytes < 4) {
            throw new DeletionVectorException(ref.describe() + ": impossible offset " + ref.offset
                    + " / sizeInBytes " + ref.sizeInBytes);
        }
        try {
            Path path = new Path(new URI(ref.dvFileUri));
            FileSystem fs = path.getFileSystem(conf);
            byte[] frame = new byte[ref.sizeInBytes + 8];
            try (FSDataInputStream in = fs.open(path)) {
                int version = in.read();
                if (version != 1) {
                    throw new DeletionVectorException(ref.describe() + ": format version " + version + ", expected 1");
                }
                in.readFully(ref.offset, frame);
            }
            ByteBuffer buf = ByteBuffer.wrap(frame).order(ByteOrder.BIG_ENDIAN);
            int stored = buf.getInt(0);
            if (stored != ref.sizeInBytes) {
                throw new DeletionVectorException(ref.describe() + ": size field says " + stored
                        + " bytes but the descriptor's sizeInBytes is " + ref.sizeInBytes);
            }
            CRC32 crc = new CRC32();
            crc.update(frame, 4, ref.sizeInBytes);
            long storedCrc = buf.getInt(4 + ref.sizeInBytes) & 0xffffffffL;
            if (crc.getValue() != storedCrc) {
                throw new DeletionVectorException(ref.describe() + ": CRC-32 mismatch, stored "
                        + Long.toHexString(storedCrc) + " but the DV bytes hash to " + Long.toHexString(crc.getValue()));
            }
            byte[] payload = new byte[ref.sizeInBytes];
            System.arraycopy(frame, 4, payload, 0, ref.sizeInBytes);
            return payload;
        } catch (FileNotFoundException e) {
            throw new DeletionVectorException(ref.describe() + ": the DV file does not exist", e);
        } catch (EOFException e) {
            throw new DeletionVectorException(ref.describe() + ": the DV file ends early (truncated?)", e);
        } catch (IOException | URISyntaxException e) {
            throw new DeletionVectorException(ref.describe() + ": " + e, e);
        }
    }

    static RowIndexBitmap decode(byte[] serialized, DeletionVectorRef ref) {
        ByteBuffer buf = ByteBuffer.wrap(serialized).order(ByteOrder.LITTLE_ENDIAN);
        try {
            int magic = buf.getInt();
            if (magic != MAGIC) {
                throw new DeletionVectorException(ref.describe() + ": magic " + magic + ", expected " + MAGIC
                        + " (portable RoaringBitmapArray)");
            }
            long buckets = buf.getLong();
            if (buckets < 0 || buckets > MAX_HIGH_KEY) {
                throw new DeletionVectorException(ref.describe() + ": bad bucket count " + buckets);
            }
            RoaringBitmap[] byHigh = new RoaringBitmap[0];
            long total = 0;
            int previous = -1;
            long max = -1;
            for (long b = 0; b < buckets; b++) {
                int key = buf.getInt();
                if (key <= previous || key > MAX_HIGH_KEY) {
                    throw new DeletionVectorException(ref.describe() + ": bucket key " + key
                            + " out of order or out of range");
                }
                previous = key;
                RoaringBitmap bitmap = new RoaringBitmap();
                bitmap.deserialize(buf.slice().order(ByteOrder.LITTLE_ENDIAN));
                buf.position(buf.position() + bitmap.serializedSizeInBytes());
                if (byHigh.length <= key) {
                    RoaringBitmap[] grown = new RoaringBitmap[key + 1];
                    System.arraycopy(byHigh, 0, grown, 0, byHigh.length);
                    byHigh = grown;
                }
                byHigh[key] = bitmap;
                total += bitmap.getLongCardinality();
                if (!bitmap.isEmpty()) {
                    max = ((long) key << 32) | (bitmap.last() & 0xffffffffL);
                }
            }
            if (total != ref.cardinality) {
                throw new DeletionVectorException(ref.describe() + ": descriptor says cardinality "
                        + ref.cardinality + " but the bitmap holds " + total + " rows");
            }
            if (ref.numRecords >= 0 && max >= ref.numRecords) {
                throw new DeletionVectorException(ref.describe() + ": deletes row index " + max
                        + " but the data file has only " + ref.numRecords + " rows (numRecords)");
            }
            return new RowIndexBitmap(byHigh);
        } catch (IOException | RuntimeException e) {
            if (e instanceof DeletionVectorException) {
                throw (DeletionVectorException) e;
            }
            throw new DeletionVectorException(ref.describe() + ": not a valid portable Roaring bitmap: " + e, e);
        }
    }

    boolean contains(long rowIndex) {
        int high = (int) (rowIndex >>> 32);
        return high < byHigh.length && byHigh[high] != null && byHigh[high].contains((int) rowIndex);
    }

    /**
     * Sets {@code marks[i]} to 1 where row {@code rowIndexes[i]} is deleted and 0 elsewhere, for
     * {@code n} rows. A batch of consecutive row indexes (the usual case) walks only the deleted
     * rows in its range; otherwise (pages skipped inside the batch) each row is looked up.
     * Returns how many rows it marked.
     */
    int mark(ColumnVector rowIndexes, int n, WritableColumnVector marks) {
        if (n == 0) {
            return 0;
        }
        long first = rowIndexes.getLong(0);
        long last = rowIndexes.getLong(n - 1);
        if (last - first == n - 1) {
            return markRange(first, n, marks);
        }
        marks.putBytes(0, n, (byte) 0);
        int marked = 0;
        for (int i = 0; i < n; i++) {
            if (contains(rowIndexes.getLong(i))) {
                marks.putByte(i, (byte) 1);
                marked++;
            }
        }
        return marked;
    }

    /**
     * {@link #mark} for {@code n} rows whose row indexes are {@code first}, {@code first + 1}, ...:
     * walks only the deleted rows in that range. Returns how many rows it marked.
     */
    int markRange(long first, int n, WritableColumnVector marks) {
        marks.putBytes(0, n, (byte) 0);
        int marked = 0;
        long last = first + n - 1;
        for (int high = (int) (first >>> 32); n > 0 && high <= (int) (last >>> 32); high++) {
            if (high >= byHigh.length) {
                break;
            }
            if (byHigh[high] == null) {
                continue;
            }
            long base = (long) high << 32;
            PeekableIntIterator it = byHigh[high].getIntIterator();
            if (first > base) {
                it.advanceIfNeeded((int) first);
            }
            while (it.hasNext()) {
                long row = base | (it.peekNext() & 0xffffffffL);
                if (row > last) {
                    break;
                }
                marks.putByte((int) (row - first), (byte) 1);
                marked++;
                it.next();
            }
        }
        return marked;
    }
}
