// Package filetrail implements kms.Trail as append-only segment files in a
// directory, and in memory (NewMemory) for stores that keep nothing on
// disk.
//
//	tr, err := filetrail.Open(filepath.Join(dataDir, "trail"))
//	...
//	defer tr.Close()
//
// # Format
//
// The trail is a run of segment files, each named for the seq of its first
// record as 20 decimal digits, zero-padded, with the suffix ".trail"
// (00000000000000000001.trail, then for instance 00000000000000170113.trail).
// A segment is a run of frames, one per record, with nothing before or
// between them; the newest segment may be followed by zero bytes
// (Preallocation, below):
//
//	[u32 length][u32 CRC-32C][u64 seq][payload]
//
// All integers are big-endian. Length is the payload's, at most
// MaxRecordSize bytes. The CRC-32C (Castagnoli) covers the 8 seq bytes and
// the payload, so a frame moved, duplicated or cut short is detected as
// surely as a flipped bit. Seqs run 1, 2, 3... across segments without a
// gap: each segment starts at the seq after the previous one's last.
//
// Append writes a batch to the newest segment, after starting a new one if
// the newest has reached Options.SegmentSize; a batch never spans two
// segments, so a segment may exceed SegmentSize by at most one batch.
//
// # Preallocation
//
// A goroutine keeps the newest segment filled with zeros, written and
// synced, up to Options.Preallocate bytes after its last frame and no
// further than SegmentSize, so that Append overwrites blocks the file has
// and its fdatasync need not commit a size change. No frame starts with 16
// zero bytes (seqs start at 1): Open takes a newest segment that ends in
// zeros, and only zeros, for clean. Before a segment is sealed, it is cut
// to its last frame and synced, and only then is the next one created; so
// a sealed segment never ends in zeros. The filler writes only after the
// furthest byte an Append has claimed, and an Open that is not followed by
// an Append writes nothing. When it cannot write (a full disk), Appends
// grow the file as they would without it.
//
// # Index files
//
// Before Append starts a new segment, it seals the one before: cuts its
// zeros and syncs it (a failed sync fails the Append, which the next one
// retries), and it never changes again. Append then writes its index file,
// named like the segment with the suffix ".index"
// (00000000000000000001.index):
//
//	"RKTIDX1\n" [u64 first seq][u64 records][u64 end][u64 offset]... [u32 CRC-32C]
//
// End is the segment's size; the offsets are those of the sparse index
// (see Reading), one per 64 records; the CRC-32C covers everything before
// it. The file is written under a temporary name (the index file's name
// followed by ".tmp"), synced, renamed into place, and the directory
// synced. Index files are a cache: when one cannot be written, Append
// succeeds all the same, and deleting them is safe, for Open rebuilds
// them. Open ignores every file whose name does not end in ".trail",
// temporary index files left by a crash among them.
//
// # Durability and crashes
//
// Append encodes its batch into one buffer, writes it with one positioned
// write after the last good frame, and returns only after fdatasync: the
// records then survive a crash of the process or of the machine. A new
// segment's directory entry is fsynced before the segment is used. If the
// write or the sync fails, the file is truncated back to its last good
// frame, so that no frame of a failed Append can turn into a record at the
// next Open; if even that fails, the next Append tries the cut again before
// it writes anything, and fails while the cut does. A write that fails for
// a full disk (ENOSPC, EDQUOT) is an error of kind NoSpace.
//
// A crash during an Append leaves at most the newest segment ending in a
// torn frame: short, with a bad length or CRC, or with an unexpected seq.
// Open reads every frame of the newest segment and ends it at its first
// bad frame, unless only zeros follow; the next Append truncates the tail
// and fsyncs before it writes. The records cut off were never
// acknowledged.
//
// Open does not read an older, sealed segment whose index file is valid:
// right magic and CRC, the segment's first seq, its size as end, as many
// records as lie between its first seq and the next segment's, as many
// offsets as that takes, the first 0 and each larger than the one before
// and below end, and the frame at the last offset holding the record the
// index says. A sealed segment whose index file is missing or not valid
// Open reads in full, as it does the newest, and then writes its index
// file. A bad frame in a sealed segment that Open reads, a gap or overlap
// between segments, or a first segment that does not start at seq 1, is
// damage that no crash explains: the trail opens with the records before
// it, Check reports it (naming the record, the segment file and the
// offset) whatever it is asked, and Append refuses to write after it, so
// that the damage is left as it was for its owner to examine. A torn tail
// of the newest segment is reported by Check only when asked for records
// that lie in it (records that were acknowledged, by the caller's
// account). Damage inside a sealed segment that Open does not read is
// found by Scan, which checks every frame it reads, and by kmsd
// verify-audit, which scans the whole trail. A file named like a segment
// that is not one (wrong number of digits, say) makes Open fail.
//
// # Reading
//
// Open keeps a sparse index in memory, the file offset of every 64th
// record of each segment (records first, first+64...), so Scan seeks close
// to its first record and then reads forward through the page cache with
// positioned reads (never a memory map: the process does not keep the
// trail resident). Scan checks every frame's CRC and seq again, and
// reports damage as an error of kind Unprocessable that names the seq. Scans run concurrently with each other and with Append;
// each sees the records appended before it began.
//
// # Errors
//
// Every error is a *kms.Error: kind TooLarge for a record over
// MaxRecordSize, Invalid for bad Options, Unprocessable for a damaged
// record found by Scan, NoSpace for a write that met a full disk, Internal
// for everything else,
// with the cause in its Err field. Errors returned by the function passed
// to Scan are returned unchanged.
package filetrail
