"""Numerical model of the forward kernel's lazy rescaling on the GPU test cases lazy_rescale_ramp_* (numpy, CPU).

Emulates, per query row, the kernel's walk over 128-key blocks from the last to the first with FlashAttention-4's
conditional rescaling (threshold 8 in log2 units, fp32 softmax state, P rounded to bf16/fp16 before P·V), and checks
it against the test rule of src/testing/fwd_runner.cpp (max |O - exact| <= 2 * max |kernel-emulating reference -
exact| + 2 ulps). Run: python3 docs/experiments/lazy_rescale_model.py. Replacing `O=O*corr` by `O=O` (skipping the
O rescale) makes every case fail by orders of magnitude, so the GPU cases can fail.
"""
import numpy as np
def bf16(x):
    x=np.asarray(x,dtype=np.float32); b=x.view(np.uint32).astype(np.uint64)
    r=((b + 0x7FFF + ((b>>16)&1))>>16)<<16
    return r.astype(np.uint32).view(np.float32)
def f16(x): return np.asarray(x,dtype=np.float32).astype(np.float16).astype(np.float32)
def run(rd, d, causal, seed=0, sq=512, sk=1024):
    rng=np.random.default_rng(seed)
    q=rd(rng.standard_normal((sq,d)).astype(np.float32))
    k=rng.standard_normal((sk,d)).astype(np.float32); j=np.arange(sk); k=rd(k*(1+2*(sk-1-j)/sk)[:,None])
    v=rd(rng.standard_normal((sk,d)).astype(np.float32))
    S=(q.astype(np.float64)@k.T.astype(np.float64))
    scale=1.0; L2E=1.4426950408889634
    worst=0; kerr=0; mag=0
    for i in range(sq):
        lim=min(sk,i+1) if causal else sk
        t=S[i,:lim]*scale
        # exact
        pe=np.exp(t-t.max()); oe=(pe@v[:lim].astype(np.float64))/pe.sum()
        # kernel-emulating reference
        pk=rd((np.exp(t-t.max())).astype(np.float32)).astype(np.float64)
        ok=(pk@v[:lim].astype(np.float64))/pe.sum()
        # lazy kernel emulation (fp32)
        m=-np.inf; rs=np.float32(0); O=np.zeros(d,np.float32)
        nb=(lim+127)//128
        s32=S[i,:lim].astype(np.float32)
        for n in range(nb-1,-1,-1):
            blk=s32[n*128:min((n+1)*128,lim)]
            bm=blk.max(); new=max(m,bm)
            with np.errstate(invalid='ignore'):
                keep=(new-m)*scale*L2E<=8
            if keep: new=m
            corr=np.float32(1.0) if new==m or new==-np.inf else np.float32(np.exp2((m-new)*scale*L2E))
            base=np.float32(new*scale*L2E)
            P=np.exp2(blk*np.float32(scale*L2E)-base).astype(np.float32)
            rs=rs*corr+P.sum(dtype=np.float32); O=O*corr
            O=O+(rd(P).astype(np.float32)@v[n*128:n*128+len(blk)]).astype(np.float32)
            m=new
        out=rd((O/rs).astype(np.float32))
        worst=max(worst,np.abs(out-oe).max()); kerr=max(kerr,np.abs(ok-oe).max()); mag=max(mag,np.abs(oe).max())
    return worst,kerr,mag
for name,rd in (("bf16",bf16),("fp16",f16)):
    for d,causal in ((128,False),(128,True),(64,True)):
        w,k,mag=run(rd,d,causal)
        ulp = 2**(np.floor(np.log2(mag))-(7 if name=="bf16" else 10))
        print(name,d,"causal" if causal else "none", f"max|out-exact|={w:.3e} kernel_ref_err={k:.3e} bound=2*k+2ulp={2*k+2*ulp:.3e}", "OK" if w<=2*k+2*ulp else "FAIL")
