package io.dvengine.spark;

import java.io.Serializable;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;

/**
 * Where one data file's deletion vector lives, as the Python driver describes it in the
 * {@code dvengine.dvs} read option: one line per data file, tab-separated,
 * <pre>
 *   fileUri  numRecords  cardinality  i  base64(serialized bitmap)
 *   fileUri  numRecords  cardinality  f  dvFileUri  offset  sizeInBytes
 *   fileUri  numRecords  n                 (a file without a DV, read in the same scan)
 * </pre>
 * The driver resolves Delta's descriptor (storage type u/p/i, Z85, relative paths) so that the
 * executors only need Hadoop FS and a byte offset. {@code fileUri} is the data file's URI; the
 * reader looks files up by its normalized form ({@link DeletionVectorParquetFormat#normalize}).
 */
final class DeletionVectorRef implements Serializable {
    private static final long serialVersionUID = 1L;

    final String fileUri;
    final long numRecords; // physical rows of the data file, -1 when the log has no stats
    final long cardinality;
    final byte[] inline; // serialized bitmap of an inline DV, else null
    final String dvFileUri; // file holding an on-disk DV, else null
    final long offset;
    final int sizeInBytes;
    final boolean noDeletionVector; // the file is listed so that one scan covers it, but has no DV

    private DeletionVectorRef(String fileUri, long numRecords, long cardinality, byte[] inline,
                              String dvFileUri, long offset, int sizeInBytes) {
        this(fileUri, numRecords, cardinality, inline, dvFileUri, offset, sizeInBytes, false);
    }

    private DeletionVectorRef(String fileUri, long numRecords, long cardinality, byte[] inline,
                              String dvFileUri, long offset, int sizeInBytes, boolean noDeletionVector) {
        this.noDeletionVector = noDeletionVector;
        this.fileUri = fileUri;
        this.numRecords = numRecords;
        this.cardinality = cardinality;
        this.inline = inline;
        this.dvFileUri = dvFileUri;
        this.offset = offset;
        this.sizeInBytes = sizeInBytes;
    }

    /** Parses the option text; a malformed line is an IllegalArgumentException quoting it. */
    static Map<String, DeletionVectorRef> parseAll(String text) {
        Map<String, DeletionVectorRef> out = new HashMap<>();
        if (text == null) {
            return out;
        }
        for (String line : text.split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            DeletionVectorRef ref = parse(line);
            String key;
            try {
                key = DeletionVectorParquetFormat.normalize(new URI(ref.fileUri));
            } catch (URISyntaxException e) {
                throw new IllegalArgumentException("dvengine.dvs names a data file that is no URI: " + ref.fileUri, e);
            }
            if (out.put(key, ref) != null) {
                throw new IllegalArgumentException("dvengine.dvs names data file " + ref.fileUri + " twice");
            }
        }
        return out;
    }

    private static DeletionVectorRef parse(String line) {
        String[] f = line.split("\t", -1);
        try {
            if (f.length == 4 && f[3].equals("n")) {
                return new DeletionVectorRef(f[0], Long.parseLong(f[1]), 0, null, null, 0, 0, true);
            }
            if (f.length == 5 && f[3].equals("i")) {
                byte[] bytes = Base64.getDecoder().decode(f[4]);
                return new DeletionVectorRef(f[0], Long.parseLong(f[1]), Long.parseLong(f[2]), bytes, null, 0, bytes.length);
            }
            if (f.length == 7 && f[3].equals("f")) {
                return new DeletionVectorRef(f[0], Long.parseLong(f[1]), Long.parseLong(f[2]), null, f[4],
                        Long.parseLong(f[5]), Integer.parseInt(f[6]));
            }
        } catch (IllegalArgumentException e) { // NumberFormatException, bad base64
            throw new IllegalArgumentException("malformed dvengine.dvs entry: " + line, e);
        }
        throw new IllegalArgumentException("malformed dvengine.dvs entry: " + line);
    }

    String describe() {
        if (noDeletionVector) {
            return "data file " + fileUri + " (no deletion vector)";
        }
        return inline != null ? "inline deletion vector of " + fileUri
                : "deletion vector file " + dvFileUri + " at offset " + offset + " (for " + fileUri + ")";
    }
}
