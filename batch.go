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

// Calls is the number of encrypt calls the batch makes, which the rate
// limits count (Service.AdmitN): Count, or one per item. A batch that
// EncryptBatch refuses as invalid counts as one call, as any refused
// request does.
func (in EncryptBatchInput) Calls() int {
	n, err := in.calls()
	if err != nil {
		return 1
	}
	return n
}

// calls is the number of calls of a valid batch, or why it is invalid.
func (in EncryptBatchInput) calls() (int, error) {
	n := in.Count
	switch {
	case in.RingName == "":
		return 0, Errorf(KindInvalid, "ringname is required")
	case in.Count != 0 && in.Items != nil:
		return 0, Errorf(KindInvalid, "give count or items, not both")
	case in.Items != nil:
		n = len(in.Items)
	}
	return n, checkBatchSize(n)
}

// Calls is the number of decrypt calls the batch makes, one per item,
// which the rate limits count (Service.AdmitN). A batch that DecryptBatch
// refuses as invalid counts as one call, as any refused request does.
func (in DecryptBatchInput) Calls() int {
	if checkBatchSize(len(in.Items)) != nil {
		return 1
	}
	return len(in.Items)
}

// checkBatchSize refuses a batch of n items out of bounds.
func checkBatchSize(n int) error {
	if n < 1 || n > MaxBatchItems {
		return Errorf(KindInvalid, "a batch has 1 to %d items, not %d", MaxBatchItems, n)
	}
	return nil
}

// EncryptBatch makes Count encrypt calls on a ring, or one per item, and
// answers them in order. Every item is an encrypt call of its own: its own
// hash and header, a step of the key's counter (a maxEncryptCount crossed
// inside the batch rotates the ring there), its own activity record, and
// its own error, which fails the item, not the batch. A caller without
// keyring.<ring>.encrypt is refused the whole batch (one record). At most
// MaxBatchItems items. A caller that applies the rate limits admits the
// batch first with AdmitN(ctx, p, in.Calls()), as httpapi does: each item
// counts as the call of its own it is.
func (s *Service) EncryptBatch(ctx context.Context, in EncryptBatchInput) (*EncryptBatchResult, error) {
	n, err := in.calls()
	if err != nil {
		return nil, err
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
// the whole batch (one record). At most MaxBatchItems items. A caller
// that applies the rate limits admits the batch first with AdmitN(ctx, p,
// in.Calls()), as httpapi does.
func (s *Service) DecryptBatch(ctx context.Context, in DecryptBatchInput) (*DecryptBatchResult, error) {
	if err := checkBatchSize(len(in.Items)); err != nil {
		return nil, err
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
	if n == 1 {
		call(0) // a single call needs no worker of its own
		return
	}
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
