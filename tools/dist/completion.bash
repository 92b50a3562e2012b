# bash completion for gossipnode, gossipctl and gossip-keygen
# (installed once per command name under bash-completion/completions/).
# gossipnode's options come from its own --help, so they never go stale.

_gossipnode()
{
        local cur prev
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        case $prev in
        --peers|--key|--config|--event-log)
                COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --data|--checkpoint-dir)
                COMPREPLY=($(compgen -d -- "$cur")); return ;;
        --model) COMPREPLY=($(compgen -W "784-512-10 cnn" -- "$cur")); return ;;
        --optimizer) COMPREPLY=($(compgen -W "sgd adam" -- "$cur")); return ;;
        --lr-schedule)
                COMPREPLY=($(compgen -W "const cosine step" -- "$cur")); return ;;
        --codec) COMPREPLY=($(compgen -W "fp32 fp16 int8 topk: none" -- "$cur")); return ;;
        --params-codec) COMPREPLY=($(compgen -W "fp32 fp16 int8" -- "$cur")); return ;;
        --log-level)
                COMPREPLY=($(compgen -W "error warn info debug" -- "$cur")); return ;;
        esac
        if [[ $cur == -* ]]; then
                local opts
                opts=$("${COMP_WORDS[0]}" --help 2>/dev/null |
                        grep -o -- '--[a-z][a-z0-9-]*' | sort -u)
                COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        fi
}

_gossipctl()
{
        local cur prev
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        case $prev in
        --socket) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --status)
                COMPREPLY=($(compgen -W "alive suspect dead left" -- "$cur")); return ;;
        esac
        if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--socket --timeout --json --status \
--interval --count --help --version" -- "$cur"))
        else
                COMPREPLY=($(compgen -W "members certs stats train version join \
leave force-leave watch" -- "$cur"))
        fi
}

_gossip_keygen()
{
        local cur prev
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        case $prev in
        --out|--show|--ca-key|--pub|--crl|--ca-pub|--show-cert|--show-crl)
                COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --addr|--name|--days|--serial) return ;;
        esac
        COMPREPLY=($(compgen -W "--out --show --force --addr --name --ca \
--sign --revoke --reissue --ca-key --pub --days --serial --crl --ca-pub --show-cert \
--show-crl --help --version" -- "$cur"))
}

complete -F _gossipnode gossipnode
complete -F _gossipctl gossipctl
complete -F _gossip_keygen gossip-keygen
