# quick experiment: vectorized MALA on RRR tempered posterior, several betas
import numpy as np, sys, math, time
def data(M,N,n,seed):
    rng=np.random.default_rng([seed,M,N,n]); return rng.standard_normal((n,M)), rng.standard_normal((n,N))
def erm(X,Y,H):
    n=len(X); Sxx=X.T@X/n; Syx=Y.T@X/n
    ev,E=np.linalg.eigh(Sxx); ir=(E/np.sqrt(ev))@E.T
    P,S,Qt=np.linalg.svd(Syx@ir); W2=P[:,:H]*np.sqrt(S[:H]); W1=(np.sqrt(S[:H])[:,None]*Qt[:H])@ir
    return W1,W2
def run(M,H,N,n,seed,nbetas,C=32,burn=1500,draws=4000,gamma=1.0,rs=0):
    X,Y=data(M,N,n,seed); Sxx=X.T@X/n; Syx=Y.T@X/n; syy=np.trace(Y.T@Y)/n
    A0,B0=erm(X,Y,H)
    def L(A,B):
        P=B@A
        return 0.5*(syy-2*np.einsum('cij,ij->c',P,Syx)+np.einsum('cij,jk,cik->c',P,Sxx,P))
    def grads(A,B):
        G=B@A@Sxx-Syx
        return np.swapaxes(B,1,2)@G, G@np.swapaxes(A,1,2)
    Ls=L(A0[None],B0[None])[0]; L0=0.5*syy
    out={}
    rng=np.random.default_rng(rs)
    for nb in nbetas:
        A=np.repeat(A0[None],C,0); B=np.repeat(B0[None],C,0)
        def U(A,B,l): return nb*l+0.5*gamma*(((A-A0)**2).sum((1,2))+((B-B0)**2).sum((1,2)))
        def gU(A,B):
            gA,gB=grads(A,B); return nb*gA+gamma*(A-A0), nb*gB+gamma*(B-B0)
        l=L(A,B); u=U(A,B,l); gA,gB=gU(A,B)
        eps=np.full(C,1e-3/ nb*100); acc=np.zeros(C); tr=[]
        for t in range(burn+draws):
            e=eps[:,None,None]
            pA=A-0.5*e*gA+np.sqrt(e)*rng.standard_normal(A.shape)
            pB=B-0.5*e*gB+np.sqrt(e)*rng.standard_normal(B.shape)
            pl=L(pA,pB); pu=U(pA,pB,pl); pgA,pgB=gU(pA,pB)
            fA=pA-A+0.5*e*gA; fB=pB-B+0.5*e*gB; bA=A-pA+0.5*e*pgA; bB=B-pB+0.5*e*pgB
            la=u-pu-((bA**2).sum((1,2))+(bB**2).sum((1,2))-(fA**2).sum((1,2))-(fB**2).sum((1,2)))/(2*eps)
            ok=np.log(rng.uniform(size=C))<la
            A=np.where(ok[:,None,None],pA,A);B=np.where(ok[:,None,None],pB,B)
            l=np.where(ok,pl,l);u=np.where(ok,pu,u);gA=np.where(ok[:,None,None],pgA,gA);gB=np.where(ok[:,None,None],pgB,gB)
            acc+=ok
            if t<burn and (t+1)%50==0: eps*=np.exp(acc/50-0.574); acc[:]=0
            if t>=burn: tr.append(l.copy())
        tr=np.array(tr)
        out[nb]=(tr.mean(), tr.mean(0).std()/np.sqrt(C))
    return out, Ls, L0
if __name__=="__main__":
    M,H,N=map(int,sys.argv[1].split(',')); n=int(float(sys.argv[2])); seeds=range(int(sys.argv[3]))
    lb=math.log(n); base=n/lb; facs=[0.5,1.0,2.0]
    for s in seeds:
        t=time.time(); out,Ls,L0=run(M,H,N,n,s,[base*f for f in facs])
        EL={f:out[base*f][0] for f in facs}
        single_ws=base*(EL[1.0]-Ls); single_0=base*(EL[1.0]-L0)
        # slope of E[nL] in 1/beta : nbeta_i (n) ; E[nL]= n*EL ; 1/beta = n/nbeta
        def slope(f1,f2):
            b1,b2=base*f1/n,base*f2/n
            return n*(EL[f1]-EL[f2])/(1/b1-1/b2)
        print(f"{(M,H,N)} n={n} s={s} single@w*={single_ws:.3f} single@0={single_0:.3f} "
              f"slope(.5,1)={slope(0.5,1.0):.3f} slope(1,2)={slope(1.0,2.0):.3f} slope(.5,2)={slope(0.5,2.0):.3f} "
              f"n(L0-Ls)={n*(L0-Ls):.2f} mcse={[round(base*f*out[base*f][1],3) for f in facs]} {time.time()-t:.0f}s",flush=True)
