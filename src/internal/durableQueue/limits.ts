/**
 * The sizes a durable outbound queue (`services/DurableOutboundQueue.ts`) works with:
 * its default window and batch, and how much its writer and reader take at once.
 *
 * @since 0.1.0
 */

/** The default window of unacked frames. */
export const DEFAULT_WINDOW_FRAMES = 65_536
/** The default window of unacked bytes. */
export const DEFAULT_WINDOW_BYTES = 64 * 1024 * 1024
/** The default most frames of one batch. */
export const DEFAULT_BATCH_FRAMES = 4096
/** The most frames one write of the writer takes, in batches (whole batches, at least one). */
export const GROUP_BATCHES = 2
/**
 * Frames pending after a write from which the writer takes them for a stream and
 * yields a turn before the next write (fewer go at once: see the writer).
 */
export const STREAM_FRAMES = 64
/** How many seqs one high-water mark write reserves ahead, at least. */
export const RESERVE_SEQS = 65_536
/** How many decoded batch records a queue keeps for the next read. */
export const DECODED_RECORDS = 4
/** How many batch records one multi-key read fetches. */
export const READ_RECORDS = 64
