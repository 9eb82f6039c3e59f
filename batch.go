package kms

import (
	"context"
	"strings"
	"sync"
)

// MaxBatchItems bounds the items of one batch call.
const MaxBatchItems = 1000

// batchWorkers bounds the items of one batch in flight at once: enough to
// fill the journal's batches (journal.MaxBatch), few enough that one batch does
// not crowd out every other caller.
const batchWorkers = 128

// EncryptBatchInput asks for Count keys of a ring, or one per item of
// Items (each with its own Asset to create or update); not both.
type EncryptBatchInput struct {
	RingName string             `json:"ringname"`
	Count    int                `json:"count,omitempty"`
	Items    []EncryptBatchItem `json:"items,omitempty"`
}

// EncryptBatchItem is one encrypt call of a batch.
type EncryptBatchItem struct {
	Asset *AssetInput `json:"asset,omitempty"`
}

// BatchError is why one item of a batch failed: the code and message an
// error answer of the same call alone would carry.
type BatchError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func batchError(err error) *BatchError {
	return &BatchError{Code: ErrorKind(err).String(), Message: ErrorMessage(err)}
}

// EncryptBatchItemResult is the answer of one item: the answer of Encrypt,
// or its error.
type EncryptBatchItemResult struct {
	*EncryptResult
	Error *BatchError `json:"error,omitempty"`
}

// EncryptBatchResult answers the items in their order.
type EncryptBatchResult struct {
	Items []EncryptBatchItemResult `json:"items"`
}

// DecryptBatchInput names the keys of earlier encrypt calls.
type DecryptBatchInput struct {
	Items []DecryptInput `json:"items"`
}

// DecryptBatchItemResult is the answer of one item: the answer of Decrypt
// (with a failed verification, its result and its error both), or its
// error.
type DecryptBatchItemResult struct {
	*DecryptResult
	Error *BatchError `json:"error,omitempty"`
}

// DecryptBatchResult answers the items in their order.
type DecryptBatchResult struct {
	Items []DecryptBatchItemResult `json:"items"`
}

// EncryptBatch makes Count encrypt calls on a ring, or one per item, and
// answers them in order. Every item is an encrypt call of its own: its own
// hash and header, a step of the key's counter (a maxEncryptCount crossed
// inside the batch rotates the ring there), its own activity record, and
// its own error, which fails the item, not the batch. A caller without
// keyring.<ring>.encrypt is refused the whole batch (one record). At most
// MaxBatchItems items.
func (s *Service) EncryptBatch(ctx context.Context, in EncryptBatchInput) (*EncryptBatchResult, error) {
	n := in.Count
	switch {
	case in.RingName == "":
		return nil, Errorf(KindInvalid, "ringname is required")
	case in.Count != 0 && in.Items != nil:
		return nil, Errorf(KindInvalid, "give count or items, not both")
	case in.Items != nil:
		n = len(in.Items)
	}
	if n < 1 || n > MaxBatchItems {
		return nil, Errorf(KindInvalid, "a batch has 1 to %d items, not %d", MaxBatchItems, n)
	}
	if _, _, err := s.resolveRing(ctx, groupKS, RingRef{Name: in.RingName}, "encrypt", OpEncrypt); err != nil {
		return nil, err
	}
	out := &EncryptBatchResult{Items: make([]EncryptBatchItemResult, n)}
	runBatch(n, func(i int) {
		call := EncryptInput{RingName: in.RingName}
		if in.Items != nil {
			call.Asset = in.Items[i].Asset
		}
		res, err := s.Encrypt(ctx, call)
		if err != nil {
			out.Items[i].Error = batchError(err)
			return
		}
		out.Items[i].EncryptResult = res
	})
	return out, nil
}

// DecryptBatch makes a decrypt call per item and answers them in order,
// each as Decrypt would: a hash or header that fails verification, or a
// key that is disabled, fails its item, not the batch. A caller without
// keyring.<ring>.decrypt on a ring that an item's hash names is refused
// the whole batch (one record). At most MaxBatchItems items.
func (s *Service) DecryptBatch(ctx context.Context, in DecryptBatchInput) (*DecryptBatchResult, error) {
	if len(in.Items) < 1 || len(in.Items) > MaxBatchItems {
		return nil, Errorf(KindInvalid, "a batch has 1 to %d items, not %d", MaxBatchItems, len(in.Items))
	}
	if _, err := principal(ctx); err != nil {
		return nil, err
	}
	// The rings the items name, each authorized once.
	seen := map[string]bool{}
	for _, it := range in.Items {
		ref, err := s.parseHash(it.Hash)
		if err != nil || seen[ref.ringID] {
			continue // a bad hash fails its item
		}
		seen[ref.ringID] = true
		r, err := s.ringByID(ctx, groupKS, ref.ringID)
		if err != nil {
			continue // a missing ring fails its items
		}
		if _, err := s.authorize(ctx, "decrypt", strings.ToLower(r.Name), RingFlag(r.Name, OpDecrypt)); err != nil {
			return nil, err
		}
	}
	out := &DecryptBatchResult{Items: make([]DecryptBatchItemResult, len(in.Items))}
	runBatch(len(in.Items), func(i int) {
		res, err := s.Decrypt(ctx, in.Items[i])
		if err != nil {
			out.Items[i].Error = batchError(err)
			if ErrorKind(err) == KindUnprocessable && res != nil {
				out.Items[i].DecryptResult = res
			}
			return
		}
		out.Items[i].DecryptResult = res
	})
	return out, nil
}

// runBatch runs call(i) for i in [0, n), batchWorkers at a time, so that
// the journal commits many items in one batch, and returns when all are
// done.
func runBatch(n int, call func(i int)) {
	workers := min(n, batchWorkers)
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				next.Lock()
				j := i
				i++
				next.Unlock()
				if j >= n {
					return
				}
				call(j)
			}
		})
	}
	wg.Wait()
}
